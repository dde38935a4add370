package reconciletest

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/idemkit/idem/reconcile"
)

// fakeProvider is a provider's ledger in memory: what it applied, by key.
type fakeProvider struct {
	mu      sync.Mutex
	entries map[string]reconcile.Applied
	lookups int
	fail    error // returned by Lookup when set
	noList  bool  // AppliedSince yields ErrListUnsupported
}

func newFake() *fakeProvider { return &fakeProvider{entries: map[string]reconcile.Applied{}} }

func (p *fakeProvider) apply(key string, amount int64, cur string, at time.Time) {
	p.put(reconcile.Applied{Key: key, Amount: amount, Currency: cur, Status: reconcile.StatusApplied, AppliedAt: at})
}

func (p *fakeProvider) put(a reconcile.Applied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries[a.Key] = a
}

func (p *fakeProvider) Lookup(_ context.Context, key string) (reconcile.Applied, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	if p.fail != nil {
		return reconcile.Applied{}, p.fail
	}
	a, ok := p.entries[key]
	if !ok {
		return reconcile.Applied{}, reconcile.ErrNotApplied
	}
	return a, nil
}

func (p *fakeProvider) AppliedSince(_ context.Context, since time.Time) iter.Seq2[reconcile.Applied, error] {
	return func(yield func(reconcile.Applied, error) bool) {
		if p.noList {
			yield(reconcile.Applied{}, reconcile.ErrListUnsupported)
			return
		}
		p.mu.Lock()
		var out []reconcile.Applied
		for _, a := range p.entries {
			if !a.AppliedAt.Before(since) {
				out = append(out, a)
			}
		}
		p.mu.Unlock()
		for _, a := range out {
			if !yield(a, nil) {
				return
			}
		}
	}
}

var errProviderDown = errors.New("provider down")
