package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

func (o ops) finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if o.batch != nil && o.batch.alone() {
		defer o.batch.endAlone()
		o.batch = nil
	}
	if o.batch == nil {
		return o.finishNow(ctx, p)
	}
	var r *idem.Record
	err := o.batch.submit(ctx, func(ctx context.Context, bo ops) (err error) {
		r, err = bo.finishNow(ctx, p)
		return err
	})
	return r, err
}

// finishNow records the outcome with a conditional UPDATE on o.write.
func (o ops) finishNow(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if r, err := o.finishKnown(ctx, p); r != nil || err != nil {
		return r, err
	}
	from := `state IN ('in_progress', 'unknown')`
	expires := sqlcodec.Micros(p.ExpiresAt)
	switch p.State {
	case idem.StateSucceeded, idem.StateFailed:
	case idem.StateUnknown:
		// Marking unknown keeps the fence and never starts retention.
		from, expires = `state = 'in_progress'`, nil
	default:
		return nil, badParam("finish: state %q is not succeeded, failed or unknown", p.State)
	}
	r, err := writeReturning(ctx, o.write, `
		UPDATE idem_records SET state = ?, result = ?, completed_at = ?, expires_at = ?
		WHERE scope = ? AND key = ? AND fence = ? AND attempt_id = ? AND `+from+`
		RETURNING `+columns,
		string(p.State), sqlcodec.Bytes(p.Result), sqlcodec.Micros(p.CompletedAt), expires,
		p.Scope, p.Key, p.Fence, p.AttemptID)
	if !errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	return o.finishRetried(ctx, p)
}

// finishKnown is finishNow's fast path for a terminal outcome when p.Claim
// is the caller's claim: one plain UPDATE, fenced like every finish (fence,
// attempt, state), that also requires each column it does not write
// (fingerprint, intent, mark, created_at, lease_until) to hold the claim's
// value. The state always changes, so a changed row means the write
// happened on exactly that record, and the answer is the claim with the
// written fields over it: no RETURNING, no result rows, no scan, all of
// which would run while holding the one writer. An Exec steps the
// statement to its end, so an autocommit write commits in sqlite3_step
// and the WAL hook (the automatic checkpoint) runs. It returns nil, nil
// when there is no usable claim or the UPDATE changed nothing (finished
// already, fenced, absent, or a heartbeat or a mark moved the record on):
// the general path decides.
func (o ops) finishKnown(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	c := &p.Claim
	if !p.State.Terminal() || c.Scope != p.Scope || c.Key != p.Key || c.Fence != p.Fence || c.AttemptID != p.AttemptID {
		return nil, nil
	}
	completed, expires := sqlcodec.Micros(p.CompletedAt), sqlcodec.Micros(p.ExpiresAt)
	res, err := o.write.ExecContext(ctx, `
		UPDATE idem_records SET state = ?, result = ?, completed_at = ?, expires_at = ?
		WHERE scope = ? AND key = ? AND fence = ? AND attempt_id = ? AND state IN ('in_progress', 'unknown')
			AND fingerprint = ? AND intent IS ? AND mark = ? AND created_at = ? AND lease_until IS ?`,
		string(p.State), sqlcodec.Bytes(p.Result), completed, expires,
		p.Scope, p.Key, p.Fence, p.AttemptID,
		c.Fingerprint[:], sqlcodec.Bytes(c.Intent), string(c.Mark), c.CreatedAt.UnixMicro(), sqlcodec.Micros(c.LeaseUntil))
	switch n, err := affected(res, err); {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, nil
	}
	// What a read would return; the driver reads an empty blob as nil.
	r := sqlcodec.Finished(c, p)
	if len(r.Intent) == 0 {
		r.Intent = nil
	}
	if len(r.Result) == 0 {
		r.Result = nil
	}
	return r, nil
}

// finishRetried decides a Finish that changed nothing: it succeeds only if
// the record already holds exactly this outcome for this fence and attempt
// (an earlier identical write whose answer was lost).
func (o ops) finishRetried(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	r, err := o.get(ctx, o.write, p.Scope, p.Key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return nil, fenced(p.Scope, p.Key, "is gone (released or swept)")
	case err != nil:
		return nil, err
	case r.Fence != p.Fence || r.AttemptID != p.AttemptID:
		return nil, fenced(p.Scope, p.Key, "is held by another fence or attempt")
	case r.State != p.State || !bytes.Equal(r.Result, p.Result):
		return nil, fenced(p.Scope, p.Key, "already holds another outcome (state "+string(r.State)+")")
	}
	return r, nil
}

func (o ops) release(ctx context.Context, p idem.ReleaseParams) error {
	res, err := o.write.ExecContext(ctx, `
		DELETE FROM idem_records
		WHERE scope = ? AND key = ? AND fence = ? AND attempt_id = ?
			AND state IN ('in_progress', 'unknown')`,
		p.Scope, p.Key, p.Fence, p.AttemptID)
	if n, err := affected(res, err); err != nil || n > 0 {
		return err
	}
	// Nothing deleted: absent is a retried release; anything else moved on.
	_, err = o.get(ctx, o.write, p.Scope, p.Key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return fenced(p.Scope, p.Key, "is terminal or held by another fence or attempt")
}

func (o ops) heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	res, err := o.write.ExecContext(ctx, `
		UPDATE idem_records SET lease_until = ?
		WHERE scope = ? AND key = ? AND fence = ? AND attempt_id = ? AND state = 'in_progress'`,
		sqlcodec.Micros(p.LeaseUntil), p.Scope, p.Key, p.Fence, p.AttemptID)
	n, err := affected(res, err)
	if err == nil && n == 0 {
		return fenced(p.Scope, p.Key, "is not in progress under this fence and attempt")
	}
	return err
}

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
