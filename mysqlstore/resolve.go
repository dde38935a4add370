package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// Resolve implements [idem.Store.Resolve]. Like Finish, it reads, decides,
// and writes conditioned on the fence and state it read. With p.Release it
// deletes the record and returns a nil record.
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := checkResolve(p); err != nil {
		return nil, err
	}
	for range maxRounds {
		r, done, err := s.resolveRound(ctx, p)
		if err != nil || done {
			return r, err
		}
	}
	return nil, s.wrap("resolve", fmt.Errorf("key %q changed %d times during one resolve", p.Key, maxRounds))
}

func checkResolve(p idem.ResolveParams) error {
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return err
	}
	if err := checkAttempt(p.AttemptID); err != nil {
		return err
	}
	if !p.Release && p.To != idem.StateSucceeded && p.To != idem.StateFailed && p.To != idem.StateInProgress {
		return fmt.Errorf("mysqlstore: ResolveParams.To is %q; want succeeded, failed or in_progress (or set Release)", p.To)
	}
	return nil
}

func (s *Store) resolveRound(ctx context.Context, p idem.ResolveParams) (*idem.Record, bool, error) {
	rec, err := s.readRecord(ctx, p.Scope, p.Key, s.decisionRead())
	if errors.Is(err, errMissing) {
		return nil, true, notFound("resolve", p.Scope, p.Key)
	}
	if err != nil {
		return nil, true, s.wrap("resolve", err)
	}
	from := p.From
	if len(from) == 0 {
		from = []idem.State{idem.StateUnknown}
	}
	if !slices.Contains(from, rec.State) || (p.Fence != 0 && p.Fence != rec.Fence) {
		return nil, true, fmt.Errorf("mysqlstore: resolve: record %q is %s at fence %d; wanted one of %v at fence %d: %w",
			p.Key, rec.State, rec.Fence, from, p.Fence, idem.ErrFenced)
	}
	if p.Release {
		done, err := s.write(ctx, "resolve", s.sql.resolveDel, p.Scope, p.Key, rec.Fence, string(rec.State))
		return nil, done, err
	}
	next := resolved(*rec, p)
	done, err := s.write(ctx, "resolve", s.sql.resolveTo, string(next.State), next.AttemptID,
		sqlcodec.Bytes(next.Result), sqlcodec.Micros(next.LeaseUntil), sqlcodec.Micros(next.CompletedAt), sqlcodec.Micros(next.ExpiresAt),
		p.Scope, p.Key, rec.Fence, string(rec.State))
	if !done || err != nil {
		return nil, done, err
	}
	return &next, true, nil
}

// resolved is r after the resolution p.
func resolved(r idem.Record, p idem.ResolveParams) idem.Record {
	r.State, r.Fence, r.AttemptID = p.To, r.Fence+1, p.AttemptID
	if p.To == idem.StateInProgress {
		r.LeaseUntil, r.CompletedAt, r.ExpiresAt, r.Result = sqlcodec.Stored(p.LeaseUntil), time.Time{}, time.Time{}, nil
		return r
	}
	r.Result, r.CompletedAt, r.ExpiresAt = p.Result, sqlcodec.Stored(p.Now), sqlcodec.Stored(p.ExpiresAt)
	return r
}

// SetMark implements [idem.Store.SetMark].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
