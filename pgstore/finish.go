package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
	"github.com/idemkit/idem/storekit/statecode"
)

// notifyArgs are the channel and payload parameters of the statements that
// wake waiters; none when notifications are disabled.
func (o ops) notifyArgs(scope, key string) []any {
	if o.st.lis == nil {
		return nil
	}
	return []any{o.st.lis.channelArg, keyToken(scope, key)}
}

// Finish implements [idem.Store.Finish]: one conditional UPDATE; only when
// it matches nothing does a read decide between "already recorded" (a
// retried write whose answer was lost: success, no write) and ErrFenced.
// With the caller's claim in p.Claim, a terminal outcome first tries
// finishKnown, which returns no record columns.
func (o ops) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return nil, errClosed("finish")
	}
	if p.State.Terminal() && !p.CompletedAt.IsZero() && !p.ExpiresAt.IsZero() {
		o.st.noteTTL(p.ExpiresAt.Sub(p.CompletedAt))
	}
	b := o.finishBatcher()
	if b != nil && b.alone() {
		defer b.endAlone()
		b = nil
	}
	if rec, err := o.finishKnown(ctx, p, b); rec != nil || err != nil {
		return rec, err
	}
	async := o.asyncOutcome()
	var query string
	var args []any
	switch p.State {
	case idem.StateSucceeded, idem.StateFailed:
		query = pick(async, o.sql.finishTerminalAsync, o.sql.finishTerminal)
		args = []any{p.Scope, p.Key, p.Fence, encodeAttempt(p.AttemptID), statecode.Of(p.State), p.Result,
			nullTime(p.CompletedAt), nullTime(p.ExpiresAt)}
	case idem.StateUnknown:
		query = pick(async, o.sql.finishUnknownAsync, o.sql.finishUnknown)
		args = []any{p.Scope, p.Key, p.Fence, encodeAttempt(p.AttemptID), nullTime(p.CompletedAt)}
	default:
		return nil, fmt.Errorf("pgstore: finish: state %q is not succeeded, failed or unknown", p.State)
	}
	args = append(args, o.notifyArgs(p.Scope, p.Key)...)
	if b != nil {
		res := b.submit(ctx, "finish", p.Scope, p.Key, query, args)
		switch {
		case res.err != nil:
			return nil, res.err
		case res.found:
			return &res.rec, nil
		}
		return o.finishRetried(ctx, p)
	}
	var notified bool
	rec, err := scanRecord(o.db.queryRow(ctx, query, args...), &notified)
	if err == nil {
		return &rec, nil
	}
	if !isNoRows(err) {
		return nil, wrap("finish", err)
	}
	return o.finishRetried(ctx, p)
}

// finishKnown is Finish's fast path for a terminal outcome when p.Claim is
// the caller's claim: one UPDATE, fenced like every finish (fence,
// attempt, state), that also requires each column it does not write
// (fingerprint, intent, mark, created_at, lease_until) to hold the claim's
// value. The state always changes, so a changed row means the write
// happened on exactly that record, and the answer is the claim with the
// written fields over it: the statement returns no record columns, only
// the wake-up boolean (nothing at all, as an Exec, when notifications are
// disabled). It returns nil, nil when there is no usable claim or the
// UPDATE changed nothing (finished already, fenced, absent, or a heartbeat
// or a mark moved the record on): the general path decides. With b (the
// finish batcher, Config.BatchFinishes) the statement goes into the group
// commit, answered by whether it changed the row: a batched outcome neither
// returns nor decodes the record.
func (o ops) finishKnown(ctx context.Context, p idem.FinishParams, b *batcher) (*idem.Record, error) {
	c := &p.Claim
	if !p.State.Terminal() || c.Scope != p.Scope || c.Key != p.Key || c.Fence != p.Fence || c.AttemptID != p.AttemptID {
		return nil, nil
	}
	fp := c.Fingerprint // a copy: slicing c's would move all of p to the heap
	args := []any{p.Scope, p.Key, p.Fence, encodeAttempt(p.AttemptID), statecode.Of(p.State), p.Result,
		nullTime(p.CompletedAt), nullTime(p.ExpiresAt),
		fp[:], c.Intent, string(c.Mark), nullTime(c.CreatedAt), nullTime(c.LeaseUntil),
		nil, nil} // room for the wake-up's channel and token: one allocation
	if lis := o.st.lis; lis != nil {
		args[13], args[14] = lis.channelArg, keyToken(p.Scope, p.Key)
	} else {
		args = args[:13]
	}
	if b != nil {
		// Batched (Config.BatchFinishes): the same statement in the
		// group commit, answered by whether it changed the row.
		switch res := b.submitExec(ctx, "finish", p.Scope, p.Key, o.sql.finishKnown, args); {
		case res.err != nil:
			return nil, res.err
		case !res.found:
			return nil, nil
		}
	} else {
		switch n, err := o.db.exec(ctx, pick(o.asyncOutcome(), o.sql.finishKnownAsync, o.sql.finishKnown), args...); {
		case err != nil:
			return nil, wrap("finish", err)
		case n == 0:
			return nil, nil
		}
	}
	// What a read returns; nil and empty blobs are stored (and read back)
	// as they are, and the lease was cleared.
	r := sqlcodec.Finished(c, p)
	r.LeaseUntil = time.Time{}
	return r, nil
}

// asyncOutcome reports whether an outcome written now may commit without
// waiting for its flush (Config.AsyncOutcomes): never in a caller's
// transaction, whose other writes are the caller's to make durable.
func (o ops) asyncOutcome() bool {
	return o.st.cfg.AsyncOutcomes && !o.db.inTx()
}

// pick returns a when cond holds, else b.
func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// finishRetried accepts a Finish whose outcome is already recorded for the
// same fence and attempt.
func (o ops) finishRetried(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	cur, err := o.get(ctx, p.Scope, p.Key)
	if err != nil {
		if isNoRows(err) {
			return nil, fenced("finish", p.Scope, p.Key, p.Fence)
		}
		return nil, wrap("finish", err)
	}
	same := cur.Fence == p.Fence && cur.AttemptID == p.AttemptID && cur.State == p.State
	if same && p.State != idem.StateUnknown {
		same = bytes.Equal(cur.Result, p.Result)
	}
	if !same {
		return nil, fenced("finish", p.Scope, p.Key, p.Fence)
	}
	return &cur, nil
}

// Release implements [idem.Store.Release] in one statement: a conditional
// DELETE, plus an existence check that tells "already gone" (success) from
// "held by someone else" (ErrFenced).
func (o ops) Release(ctx context.Context, p idem.ReleaseParams) error {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return errClosed("release")
	}
	args := append([]any{p.Scope, p.Key, p.Fence, encodeAttempt(p.AttemptID)}, o.notifyArgs(p.Scope, p.Key)...)
	var deleted int64
	var exists bool
	if err := o.db.queryRow(ctx, o.sql.release, args...).Scan(&deleted, &exists); err != nil {
		return wrap("release", err)
	}
	if deleted == 0 && exists {
		return fenced("release", p.Scope, p.Key, p.Fence)
	}
	return nil
}

// Heartbeat implements [idem.Store.Heartbeat].
func (o ops) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return errClosed("heartbeat")
	}
	n, err := o.db.exec(ctx, o.sql.heartbeat, p.Scope, p.Key, p.Fence, encodeAttempt(p.AttemptID), nullTime(p.LeaseUntil))
	if err != nil {
		return wrap("heartbeat", err)
	}
	if n == 0 {
		return fenced("heartbeat", p.Scope, p.Key, p.Fence)
	}
	return nil
}

// notFoundOrFenced explains why a conditional write matched no row.
func (o ops) notFoundOrFenced(ctx context.Context, op, scope, key string, fence int64) error {
	_, err := o.get(ctx, scope, key)
	switch {
	case err == nil:
		return fenced(op, scope, key, fence)
	case isNoRows(err):
		return idem.ErrNotFound
	}
	return wrap(op, err)
}
