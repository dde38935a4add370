package reconciletest

import (
	"context"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// countingStore counts the write calls that reach a store, so a test can
// show that a second reconciliation run writes nothing at all.
type countingStore struct {
	idem.Store
	writes atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	s.writes.Add(1)
	return s.Store.Claim(ctx, p)
}

func (s *countingStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	s.writes.Add(1)
	return s.Store.Finish(ctx, p)
}

func (s *countingStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	s.writes.Add(1)
	return s.Store.Release(ctx, p)
}

func (s *countingStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	s.writes.Add(1)
	return s.Store.Resolve(ctx, p)
}

func (s *countingStore) SetMark(ctx context.Context, scope, key string, fence int64, m idem.Mark) error {
	s.writes.Add(1)
	return s.Store.SetMark(ctx, scope, key, fence, m)
}
