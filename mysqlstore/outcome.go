package mysqlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Finish implements [idem.Store.Finish]. It reads the record, decides in Go
// whether the write is allowed (or already done), and writes with an UPDATE
// conditioned on the fence, attempt and state it read, so a concurrent
// change makes the UPDATE match nothing and the decision is taken again.
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if p.State != idem.StateSucceeded && p.State != idem.StateFailed && p.State != idem.StateUnknown {
		return nil, fmt.Errorf("mysqlstore: FinishParams.State is %q; want succeeded, failed or unknown", p.State)
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return nil, err
	}
	for range maxRounds {
		r, done, err := s.finishRound(ctx, p)
		if err != nil || done {
			return r, err
		}
	}
	return nil, s.wrap("finish", fmt.Errorf("key %q changed %d times during one finish", p.Key, maxRounds))
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
	result, expires := nullBytes(p.Result), micros(p.ExpiresAt)
	if p.State == idem.StateUnknown {
		result, expires = nullBytes(rec.Result), nil
	}
	done, err := s.write(ctx, "finish", s.sql.finish, string(p.State), result, micros(p.CompletedAt),
		expires, p.Scope, p.Key, p.Fence, p.AttemptID, string(rec.State))
	if !done || err != nil {
		return nil, done, err
	}
	rec.State, rec.CompletedAt = p.State, norm(p.CompletedAt)
	if p.State != idem.StateUnknown {
		rec.Result, rec.ExpiresAt = p.Result, norm(p.ExpiresAt)
	}
	return rec, true, nil
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
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return err
	}
	n, err := s.exec(ctx, s.sql.heartbeat, micros(p.LeaseUntil), p.Scope, p.Key, p.Fence, p.AttemptID)
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

// SetMark implements [idem.Store.SetMark].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkIdentity(scope, key); err != nil {
		return err
	}
	if len(mark) > maxMarkLen {
		return fmt.Errorf("mysqlstore: mark is %d bytes, longer than %d", len(mark), maxMarkLen)
	}
	n, err := s.exec(ctx, s.sql.setMark, string(mark), scope, key, fence)
	if err != nil {
		return s.wrap("set mark", err)
	}
	if n > 0 {
		return nil
	}
	rec, err := s.readRecord(ctx, scope, key, s.decisionRead())
	if errors.Is(err, errMissing) {
		return notFound("set mark", scope, key)
	}
	if err != nil {
		return s.wrap("set mark", err)
	}
	if rec.Fence != fence {
		return fenced("set mark", rec, fence, rec.AttemptID)
	}
	return nil // the mark already had this value
}
