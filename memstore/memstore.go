// Package memstore is an in-memory [idem.Store] for tests, examples and
// single-process programs that accept losing their records on exit.
//
// It is the reference implementation of the store contract: every method
// holds one mutex, so each operation is trivially atomic. It implements
// [idem.Notifier].
package memstore

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/listorder"
)

type rkey struct{ scope, key string }

// Store is an in-memory store. The zero value is not usable; call [New].
type Store struct {
	mu     sync.Mutex
	recs   map[rkey]*idem.Record
	subs   map[rkey]map[*sub]struct{}
	closed bool
	writes int64
	// claimGap, when set (by this package's tests), runs inside Claim
	// between its read of the record and its write: the point where a
	// claim that let go of its lock would let a competitor in.
	claimGap func()
}

type sub struct{ ch chan struct{} }

// New returns an empty store.
func New() *Store {
	return &Store{recs: make(map[rkey]*idem.Record), subs: make(map[rkey]map[*sub]struct{})}
}

var _ idem.Store = (*Store)(nil)
var _ idem.Notifier = (*Store)(nil)

// ProcessLocal reports true: no other process can change this store's
// records, so the engine's replay cache is exact for it.
func (s *Store) ProcessLocal() bool { return true }

// Writes returns how many writes the store has performed (inserts, updates
// and deletes). Tests use it to show that a replay costs no write.
func (s *Store) Writes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return idem.ErrClosed
	}
	return nil
}

// clone returns a copy of r for a caller. Its Intent and Result share the
// stored record's bytes, which the store never modifies (it copies what it
// is given and replaces, never edits, a record's bytes), capped so that an
// append cannot write into them. Callers must not modify them, as with the
// engine's replay cache.
func clone(r *idem.Record) idem.Record {
	c := *r
	c.Intent = r.Intent[:len(r.Intent):len(r.Intent)]
	c.Result = r.Result[:len(r.Result):len(r.Result)]
	return c
}

// wrote counts a write and wakes subscribers of k. Called with mu held.
func (s *Store) wrote(k rkey) {
	s.writes++
	for sb := range s.subs[k] {
		select {
		case sb.ch <- struct{}{}:
		default:
		}
	}
}

// Claim implements [idem.Store].
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := s.lock(ctx); err != nil {
		return idem.ClaimResult{}, err
	}
	defer s.mu.Unlock()
	k := rkey{p.Scope, p.Key}
	old := s.recs[k]
	if s.claimGap != nil {
		s.claimGap()
	}
	switch {
	case old == nil || old.Expired(p.Now):
		fence := int64(1)
		if old != nil {
			fence = old.Fence + 1
		}
		r := &idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
			Fence: fence, AttemptID: p.AttemptID, Intent: bytes.Clone(p.Intent), CreatedAt: p.Now, LeaseUntil: p.LeaseUntil}
		s.recs[k] = r
		s.wrote(k)
		return idem.ClaimResult{Record: clone(r), Claimed: true}, nil
	case old.State == idem.StateInProgress && old.AttemptID == p.AttemptID:
		return idem.ClaimResult{Record: clone(old), Claimed: true}, nil
	default:
		return idem.ClaimResult{Record: clone(old)}, nil
	}
}

func holds(r *idem.Record, fence int64, attempt string) bool {
	return r != nil && r.Fence == fence && r.AttemptID == attempt
}

// Finish implements [idem.Store].
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	k := rkey{p.Scope, p.Key}
	r := s.recs[k]
	if !holds(r, p.Fence, p.AttemptID) {
		return nil, idem.ErrFenced
	}
	if r.State == p.State && (p.State == idem.StateUnknown || bytes.Equal(r.Result, p.Result)) {
		c := clone(r) // a retried write whose answer was lost
		return &c, nil
	}
	switch {
	case p.State.Terminal() && (r.State == idem.StateInProgress || r.State == idem.StateUnknown):
		r.State, r.Result, r.CompletedAt, r.ExpiresAt = p.State, bytes.Clone(p.Result), p.CompletedAt, p.ExpiresAt
	case p.State == idem.StateUnknown && r.State == idem.StateInProgress:
		r.State, r.CompletedAt = idem.StateUnknown, p.CompletedAt
	default:
		return nil, idem.ErrFenced
	}
	s.wrote(k)
	c := clone(r)
	return &c, nil
}

// Release implements [idem.Store].
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := rkey{p.Scope, p.Key}
	r := s.recs[k]
	if r == nil {
		return nil
	}
	if !holds(r, p.Fence, p.AttemptID) || r.State.Terminal() {
		return idem.ErrFenced
	}
	delete(s.recs, k)
	s.wrote(k)
	return nil
}

// Heartbeat implements [idem.Store].
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.recs[rkey{p.Scope, p.Key}]
	if !holds(r, p.Fence, p.AttemptID) || r.State != idem.StateInProgress {
		return idem.ErrFenced
	}
	r.LeaseUntil = p.LeaseUntil
	s.writes++
	return nil
}

// Resolve implements [idem.Store].
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	k := rkey{p.Scope, p.Key}
	r := s.recs[k]
	if r == nil {
		return nil, idem.ErrNotFound
	}
	from := p.From
	if len(from) == 0 {
		from = []idem.State{idem.StateUnknown}
	}
	if !slices.Contains(from, r.State) || (p.Fence != 0 && r.Fence != p.Fence) {
		return nil, idem.ErrFenced
	}
	if p.Release {
		delete(s.recs, k)
		s.wrote(k)
		return nil, nil
	}
	r.Fence++
	r.AttemptID = p.AttemptID
	r.State = p.To
	switch p.To {
	case idem.StateInProgress:
		r.LeaseUntil, r.CompletedAt, r.ExpiresAt, r.Result = p.LeaseUntil, time.Time{}, time.Time{}, nil
	default:
		r.Result, r.CompletedAt, r.ExpiresAt = bytes.Clone(p.Result), p.Now, p.ExpiresAt
	}
	s.wrote(k)
	c := clone(r)
	return &c, nil
}

// SetMark implements [idem.Store].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.recs[rkey{scope, key}]
	if r == nil {
		return idem.ErrNotFound
	}
	if r.Fence != fence {
		return idem.ErrFenced
	}
	r.Mark = mark
	s.writes++
	return nil
}

// Get implements [idem.Store].
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.recs[rkey{scope, key}]
	if r == nil {
		return nil, idem.ErrNotFound
	}
	c := clone(r)
	return &c, nil
}

// List implements [idem.Store].
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []idem.Record
	for _, r := range s.recs {
		if f.Scope != "" && r.Scope != f.Scope {
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
			continue
		}
		if !f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore) {
			continue
		}
		if !listorder.After(r, f.After) {
			continue
		}
		out = append(out, clone(r))
	}
	return listorder.Page(out, f.Limit), nil
}

// Sweep implements [idem.Store].
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.recs {
		if p.Limit > 0 && n >= p.Limit {
			break
		}
		if r.Expired(p.Now) {
			delete(s.recs, k)
			s.wrote(k)
			n++
		}
	}
	return n, nil
}

// Subscribe implements [idem.Notifier].
func (s *Store) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	if err := s.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	k := rkey{scope, key}
	sb := &sub{ch: make(chan struct{}, 1)}
	if s.subs[k] == nil {
		s.subs[k] = make(map[*sub]struct{})
	}
	s.subs[k][sb] = struct{}{}
	var once sync.Once
	return sb.ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.subs[k], sb)
			if len(s.subs[k]) == 0 {
				delete(s.subs, k)
			}
		})
	}, nil
}

// Close implements [idem.Store].
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
