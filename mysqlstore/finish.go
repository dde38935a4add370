package mysqlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// Finish implements [idem.Store.Finish].
//
// When p.Claim holds the caller's claim (the engine passes it) and the
// outcome is terminal, Finish is one plain UPDATE, the same statement a
// bare driver would send plus conditions: it is fenced (fence, attempt,
// state) and also requires the columns it does not write to hold the
// claim's values, so when it changes the row the record is known without
// reading it back. When it changes nothing, the paths below decide.
//
// On a store made by [Open] (outside WithTx) it is one round trip: a batch
// of the read, an UPDATE conditioned on the fence, the attempt and the
// states the outcome may follow, and SELECT ROW_COUNT(). A changed row
// means the write happened, and the record is the read with the written
// fields over it; otherwise the read tells a retried write (the same
// outcome already there: success), a lost record (ErrFenced), and a record
// that changed between the statements (decided again).
//
// Otherwise (a pool from [New], whose DSN may not allow several statements
// per query, or a transaction) it reads the record, decides in Go whether
// the write is allowed (or already done), and writes with an UPDATE
// conditioned on the fence, attempt and state it read, so a concurrent
// change makes the UPDATE match nothing and the decision is taken again.
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p.State != idem.StateSucceeded && p.State != idem.StateFailed && p.State != idem.StateUnknown {
		return nil, fmt.Errorf("mysqlstore: FinishParams.State is %q; want succeeded, failed or unknown", p.State)
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return nil, err
	}
	if rec, done, err := s.finishKnown(ctx, p); done || err != nil {
		return rec, err
	}
	round := s.finishRound
	if s.multi && s.tx == nil {
		round = s.finishBatch
	}
	for range maxRounds {
		r, done, err := round(ctx, p)
		if err != nil || done {
			return r, err
		}
	}
	return nil, s.wrap("finish", fmt.Errorf("key %q changed %d times during one finish", p.Key, maxRounds))
}

// finishKnown is Finish's fast path for a terminal outcome when p.Claim is
// the caller's claim: one UPDATE, fenced like every finish, that also
// requires each column it does not write (fingerprint, intent, mark,
// created_at, lease_until) to hold the claim's value. The state always
// changes, so a changed row means the write happened on exactly that
// record, and the result is the claim with the written fields over it; no
// read, no second statement. done is false when there is no usable claim
// or the UPDATE matched nothing (finished already, fenced, absent, or the
// record moved on by a heartbeat or a mark): the general path decides.
func (s *Store) finishKnown(ctx context.Context, p idem.FinishParams) (*idem.Record, bool, error) {
	c := &p.Claim
	if !p.State.Terminal() || c.Scope != p.Scope || c.Key != p.Key || c.Fence != p.Fence || c.AttemptID != p.AttemptID {
		return nil, false, nil
	}
	fpr := c.Fingerprint // a copy, so that only these 32 bytes go to the heap, not p
	for range maxRounds {
		n, err := s.exec(ctx, s.sql.finishKnown, string(p.State), sqlcodec.Bytes(p.Result), sqlcodec.Micros(p.CompletedAt),
			sqlcodec.Micros(p.ExpiresAt), p.Scope, p.Key, p.Fence, p.AttemptID,
			fpr[:], sqlcodec.Bytes(c.Intent), string(c.Mark), c.CreatedAt.UnixMicro(), sqlcodec.Micros(c.LeaseUntil))
		switch {
		case err == nil && n == 0:
			return nil, false, nil
		case err == nil:
		case s.retryable(err):
			continue
		default:
			return nil, true, s.wrap("finish", err)
		}
		rec := *c
		rec.CreatedAt, rec.LeaseUntil = sqlcodec.Stored(c.CreatedAt), sqlcodec.Stored(c.LeaseUntil)
		return overlay(&rec, p), true, nil
	}
	return nil, false, nil
}

func (s *Store) finishRound(ctx context.Context, p idem.FinishParams) (*idem.Record, bool, error) {
	rec, err := s.readRecord(ctx, p.Scope, p.Key, s.decisionRead())
	if errors.Is(err, errMissing) {
		return nil, true, fenced("finish", nil, p.Fence, p.AttemptID)
	}
	if err != nil {
		return nil, true, s.wrap("finish", err)
	}
	if rec.Fence != p.Fence || rec.AttemptID != p.AttemptID {
		return nil, true, fenced("finish", rec, p.Fence, p.AttemptID)
	}
	if sameOutcome(rec, p) {
		return rec, true, nil // a retried write whose answer was lost
	}
	if !finishAllowed(rec.State, p.State) {
		return nil, true, fenced("finish", rec, p.Fence, p.AttemptID)
	}
	// An unknown outcome keeps no result and never expires.
	result, expires := sqlcodec.Bytes(p.Result), sqlcodec.Micros(p.ExpiresAt)
	if p.State == idem.StateUnknown {
		result, expires = sqlcodec.Bytes(rec.Result), nil
	}
	done, err := s.write(ctx, "finish", s.sql.finish, string(p.State), result, sqlcodec.Micros(p.CompletedAt),
		expires, p.Scope, p.Key, p.Fence, p.AttemptID, string(rec.State))
	if !done || err != nil {
		return nil, done, err
	}
	rec.State, rec.CompletedAt = p.State, sqlcodec.Stored(p.CompletedAt)
	if p.State != idem.StateUnknown {
		rec.Result, rec.ExpiresAt = p.Result, sqlcodec.Stored(p.ExpiresAt)
	}
	return rec, true, nil
}

// finishBatch is one round of Finish as a single SELECT+UPDATE+ROW_COUNT
// batch: the same read-decide-write as finishRound, with the decision
// taken in SQL and checked against the read afterwards.
func (s *Store) finishBatch(ctx context.Context, p idem.FinishParams) (*idem.Record, bool, error) {
	var args []any
	query := s.sql.finishOne
	if p.State == idem.StateUnknown {
		query = s.sql.unknownOne
		args = []any{p.Scope, p.Key, sqlcodec.Micros(p.CompletedAt), p.Scope, p.Key, p.Fence, p.AttemptID}
	} else {
		args = []any{p.Scope, p.Key, string(p.State), sqlcodec.Bytes(p.Result), sqlcodec.Micros(p.CompletedAt),
			sqlcodec.Micros(p.ExpiresAt), p.Scope, p.Key, p.Fence, p.AttemptID}
	}
	rec, changed, err := s.queryFinish(ctx, query, args)
	switch {
	case s.retryable(err):
		return nil, false, nil
	case err != nil:
		return nil, true, s.wrap("finish", err)
	}
	mine := rec != nil && rec.Fence == p.Fence && rec.AttemptID == p.AttemptID
	switch {
	case changed > 0 && mine:
		return overlay(rec, p), true, nil
	case changed > 0:
		// The record became ours between the read and the write: only
		// a retry can read what was written over.
		return nil, false, nil
	case rec == nil:
		return nil, true, fenced("finish", nil, p.Fence, p.AttemptID)
	case !mine:
		return nil, true, fenced("finish", rec, p.Fence, p.AttemptID)
	case sameOutcome(rec, p):
		return rec, true, nil // a retried write whose answer was lost
	case finishAllowed(rec.State, p.State):
		return nil, false, nil // changed between the read and the write
	}
	return nil, true, fenced("finish", rec, p.Fence, p.AttemptID)
}

// queryFinish runs a finish batch and returns the record as read (nil if
// absent) and the rows the UPDATE changed.
func (s *Store) queryFinish(ctx context.Context, query string, args []any) (rec *idem.Record, changed int64, err error) {
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	if rows.Next() {
		if rec, err = scanRecord(rows); err != nil {
			return nil, 0, err
		}
	}
	if !rows.NextResultSet() || !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		return nil, 0, errors.New("finish batch: no ROW_COUNT() result")
	}
	if err := rows.Scan(&changed); err != nil {
		return nil, 0, err
	}
	return rec, changed, rows.Close()
}

// overlay returns r with the fields a Finish with p wrote.
func overlay(r *idem.Record, p idem.FinishParams) *idem.Record {
	r.Fence, r.AttemptID, r.State, r.CompletedAt = p.Fence, p.AttemptID, p.State, sqlcodec.Stored(p.CompletedAt)
	if p.State != idem.StateUnknown {
		r.Result, r.ExpiresAt = p.Result, sqlcodec.Stored(p.ExpiresAt)
	}
	return r
}

// sameOutcome reports whether r already holds p's outcome. An unknown
// outcome carries no result.
func sameOutcome(r *idem.Record, p idem.FinishParams) bool {
	return r.State == p.State && (p.State == idem.StateUnknown || bytes.Equal(r.Result, p.Result))
}

// finishAllowed: in_progress may become anything; unknown may only become
// terminal (the truth arriving late).
func finishAllowed(from, to idem.State) bool {
	switch from {
	case idem.StateInProgress:
		return true
	case idem.StateUnknown:
		return to.Terminal()
	}
	return false
}

// Release implements [idem.Store.Release]: a fenced DELETE; when it deletes
// nothing, a read tells an absent record (success: a retry after a lost
// answer) from one held by someone else (ErrFenced).
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return err
	}
	for range maxRounds {
		n, err := s.exec(ctx, s.sql.release, p.Scope, p.Key, p.Fence, p.AttemptID)
		if s.retryable(err) {
			continue
		}
		if err != nil {
			return s.wrap("release", err)
		}
		if n > 0 {
			return nil
		}
		rec, err := s.readRecord(ctx, p.Scope, p.Key, s.decisionRead())
		if errors.Is(err, errMissing) {
			return nil
		}
		if err != nil {
			return s.wrap("release", err)
		}
		if !releasable(rec, p) {
			return fenced("release", rec, p.Fence, p.AttemptID)
		}
		// It became releasable after the DELETE looked: try again.
	}
	return s.wrap("release", fmt.Errorf("key %q changed %d times during one release", p.Key, maxRounds))
}

func releasable(r *idem.Record, p idem.ReleaseParams) bool {
	return r.Fence == p.Fence && r.AttemptID == p.AttemptID &&
		(r.State == idem.StateInProgress || r.State == idem.StateUnknown)
}

// Heartbeat implements [idem.Store.Heartbeat]. MySQL reports changed rows,
// not matched rows, unless the DSN sets clientFoundRows; so when the UPDATE
// reports 0, a read decides whether the lease already had this value (a
// retried heartbeat: success) or the attempt lost the record (ErrFenced).
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return err
	}
	n, err := s.exec(ctx, s.sql.heartbeat, sqlcodec.Micros(p.LeaseUntil), p.Scope, p.Key, p.Fence, p.AttemptID)
	if err != nil {
		return s.wrap("heartbeat", err)
	}
	if n > 0 {
		return nil
	}
	rec, err := s.readRecord(ctx, p.Scope, p.Key, s.decisionRead())
	if errors.Is(err, errMissing) {
		return fenced("heartbeat", nil, p.Fence, p.AttemptID)
	}
	if err != nil {
		return s.wrap("heartbeat", err)
	}
	// Fence and attempt never come back once changed, so a match here
	// means the UPDATE matched too and found the lease already set.
	if rec.State == idem.StateInProgress && rec.Fence == p.Fence && rec.AttemptID == p.AttemptID {
		return nil
	}
	return fenced("heartbeat", rec, p.Fence, p.AttemptID)
}
