package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// maxClaimRounds bounds Claim's loop. A round repeats only when a concurrent
// writer changed the key between two statements (or a statement saw no row
// because of the snapshot trap), so a handful of rounds is already unusual.
const maxClaimRounds = 64

// noRowRounds counts claim statements that returned no row (the snapshot
// trap), so the concurrency test can show it exercised the retry.
var noRowRounds atomic.Int64

// Claim implements [idem.Store.Claim]. A replay is one statement, a SELECT
// by primary key. A first claim adds a second: a CTE that reads the row
// again and, only when it sees none, runs INSERT … ON CONFLICT (scope, key)
// DO NOTHING RETURNING. The primary key decides between concurrent
// claimers; a duplicate never writes.
//
// PostgreSQL's snapshot trap: when the insert has to wait for a concurrent
// inserter of the same key, it then does nothing, yet the read in the same
// statement uses a snapshot taken before the winner committed and finds no
// row. Claim then runs the statement again (a new snapshot under READ
// COMMITTED sees the winner), up to a bound and while ctx is live.
//
// An expired succeeded/failed record is taken over by a second, conditional
// statement (fence, state and expiry re-checked); if another caller got
// there first, Claim starts over.
func (o ops) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return idem.ClaimResult{}, errClosed("claim")
	}
	for range maxClaimRounds {
		res, done, err := o.claimRound(ctx, p)
		if err != nil || done {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return idem.ClaimResult{}, wrap("claim", err)
		}
	}
	return idem.ClaimResult{}, wrap("claim", fmt.Errorf("no stable answer for %q/%q after %d rounds", p.Scope, p.Key, maxClaimRounds))
}

// claimRound runs the claim statement once and, for an expired record, the
// take-over. done is false when the round must be repeated.
func (o ops) claimRound(ctx context.Context, p idem.ClaimParams) (res idem.ClaimResult, done bool, err error) {
	rec, claimed, found, err := o.claimOnce(ctx, p)
	if err == nil && !found {
		noRowRounds.Add(1)
	}
	if err != nil || !found {
		return res, false, o.retryable("claim", err)
	}
	switch {
	case claimed:
		return idem.ClaimResult{Record: rec, Claimed: true}, true, nil
	case rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID:
		// Our own earlier claim committed but its answer was lost — or,
		// with replicated claims, its wait for the standbys was: it is
		// made durable on them before it is reported.
		if o.st.replicated() {
			mine, err := o.confirmOwn(ctx, p, rec.Fence)
			if err != nil || !mine {
				return res, false, o.retryable("claim", err)
			}
		}
		return idem.ClaimResult{Record: rec, Claimed: true}, true, nil
	case rec.Expired(p.Now):
		rec, found, err := o.reclaimAt(ctx, p, rec.Fence)
		if err != nil || !found {
			return res, false, o.retryable("claim", err)
		}
		return idem.ClaimResult{Record: rec, Claimed: true}, true, nil
	default:
		return idem.ClaimResult{Record: rec}, true, nil
	}
}

// retryable returns nil for outcomes after which the round may be repeated:
// no error, or a serialization failure outside a caller's transaction.
func (o ops) retryable(op string, err error) error {
	if err == nil || (!o.db.inTx() && isRetryable(err)) {
		return nil
	}
	return wrap(op, err)
}

// claimOnce answers one claim round. When recent claims were mostly
// duplicates it first reads the record by primary key, a plain SELECT that
// decides nothing; on a miss, or straight away when recent claims were
// mostly first-time, it runs the claim statement (batched when group
// commit is on), where the primary key decides between claimers.
func (o ops) claimOnce(ctx context.Context, p idem.ClaimParams) (rec idem.Record, claimed, found bool, err error) {
	mix := &o.st.mix
	if mix.ReadFirst() {
		rec, err = o.get(ctx, p.Scope, p.Key)
		if err == nil || !isNoRows(err) {
			mix.Observe(err == nil)
			return rec, false, err == nil, err
		}
	}
	fp := p.Fingerprint // a copy: slicing p's own would move all of p to the heap
	args := []any{p.Scope, p.Key, fp[:], encodeAttempt(p.AttemptID), p.Intent, nullTime(p.Now), nullTime(p.LeaseUntil)}
	b := o.batcher()
	if b != nil && b.alone() {
		defer b.endAlone()
		b = nil
	}
	if b != nil {
		if !mix.ReadFirst() {
			// Mostly first-time requests: the plain insert, batched, as
			// a statement that returns no rows. One row inserted is our
			// claim, and the record is exactly what was inserted, so
			// nothing is returned or decoded; none means the key is
			// taken (or its inserter committed after the statement's
			// snapshot), and the claim statement below, in a batch of
			// its own, reads it.
			res := b.submitExec(ctx, "claim", p.Scope, p.Key, o.sql.insertOnly, args)
			if res.err != nil {
				return rec, false, false, res.err
			}
			if res.found {
				mix.Observe(false)
				return insertedRecord(p), true, true, nil
			}
		}
		res := b.submit(ctx, "claim", p.Scope, p.Key, o.sql.claim, args)
		rec, claimed, found, err = res.rec, res.flag, res.found, res.err
	} else if o.st.replicated() && !o.db.inTx() {
		rec, claimed, found, err = o.claimSync(ctx, p, args)
	} else {
		if !mix.ReadFirst() {
			// Mostly first-time requests: try the plain insert. One row
			// inserted is our claim, and the record is exactly what was
			// inserted, so nothing is read back; none means the key is
			// taken, and the claim statement below reads it (one more
			// round trip, rare here).
			n, err := o.db.exec(ctx, o.sql.insertOnly, args...)
			if err != nil {
				return rec, false, false, err
			}
			if n == 1 {
				mix.Observe(false)
				return insertedRecord(p), true, true, nil
			}
		}
		var flag bool // scanned into: declared here, it costs the insert path nothing
		rec, err = scanRecord(o.db.queryRow(ctx, o.sql.claim, args...), &flag)
		claimed, found = flag, err == nil
		if isNoRows(err) {
			err = nil
		}
	}
	if found {
		mix.Observe(!claimed)
	}
	return rec, claimed, found, err
}

// claimSync is claimOnce's unbatched statements for a replicated claim, on
// a connection of their own whose commits must be confirmed by the
// standbys (see onSyncConn).
func (o ops) claimSync(ctx context.Context, p idem.ClaimParams, args []any) (rec idem.Record, claimed, found bool, err error) {
	err = o.st.onSyncConn(ctx, func(ctx context.Context, q querier) error {
		n, err := q.exec(ctx, o.sql.insertOnly, args...)
		if err != nil || n == 1 {
			rec, claimed, found = insertedRecord(p), n == 1, n == 1
			return err
		}
		var flag bool
		rec, err = scanRecord(q.queryRow(ctx, o.sql.claim, args...), &flag)
		claimed, found = flag, err == nil
		if isNoRows(err) {
			err = nil
		}
		return err
	})
	if err != nil {
		return idem.Record{}, false, false, err
	}
	return rec, claimed, found, nil
}

// syncWrite runs write where a replicated claim's statements run: in the
// caller's transaction (whose COMMIT then waits for the standbys), or on a
// connection of its own whose commits are checked (onSyncConn).
func (o ops) syncWrite(ctx context.Context, write func(ctx context.Context, q querier) error) error {
	if o.db.inTx() {
		return write(ctx, o.db)
	}
	return o.st.onSyncConn(ctx, write)
}

// confirmOwn makes the claim's own in_progress row, found at fence, durable
// on the standbys: it rewrites the row unchanged in a transaction that
// waits for them (touchOwn). It reports false when the row is no longer
// the attempt's claim at that fence.
func (o ops) confirmOwn(ctx context.Context, p idem.ClaimParams, fence int64) (bool, error) {
	var n int64
	err := o.syncWrite(ctx, func(ctx context.Context, q querier) (err error) {
		n, err = q.exec(ctx, o.sql.touchOwn, p.Scope, p.Key, fence, encodeAttempt(p.AttemptID))
		return err
	})
	return n == 1, err
}

// reclaimAt takes over the expired record at fence (reclaim), waiting for
// the standbys when claims are replicated.
func (o ops) reclaimAt(ctx context.Context, p idem.ClaimParams, fence int64) (rec idem.Record, found bool, err error) {
	if !o.st.replicated() || o.db.inTx() {
		return o.reclaim(ctx, o.db, p, fence)
	}
	err = o.st.onSyncConn(ctx, func(ctx context.Context, q querier) (err error) {
		rec, found, err = o.reclaim(ctx, q, p, fence)
		return err
	})
	return rec, found, err
}

func (o ops) reclaim(ctx context.Context, db querier, p idem.ClaimParams, fence int64) (idem.Record, bool, error) {
	fp := p.Fingerprint
	row := db.queryRow(ctx, o.sql.reclaim, p.Scope, p.Key, fp[:], encodeAttempt(p.AttemptID), p.Intent,
		nullTime(p.Now), nullTime(p.LeaseUntil), fence)
	rec, err := scanRecord(row)
	if isNoRows(err) {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// insertedRecord is the record the first-time insert wrote for p: the
// columns it sets, with the types and precision the table keeps.
func insertedRecord(p idem.ClaimParams) idem.Record {
	rec := idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress, Fence: 1,
		AttemptID: p.AttemptID, CreatedAt: p.Now.UTC().Truncate(time.Microsecond),
	}
	if len(p.Intent) > 0 {
		rec.Intent = p.Intent
	}
	if !p.LeaseUntil.IsZero() {
		rec.LeaseUntil = p.LeaseUntil.UTC().Truncate(time.Microsecond)
	}
	return rec
}
