package idemtest

import (
	"context"
	"errors"
	"sync"

	"github.com/idemkit/idem"
)

// errStoreDown is what failOnce returns.
var errStoreDown = errors.New("idemtest: store unavailable (injected)")

// failOnce fails the first call of each named operation without applying it.
type failOnce struct {
	idem.Store
	mu  sync.Mutex
	ops map[string]bool
}

func (f *failOnce) take(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops[op] {
		delete(f.ops, op)
		return true
	}
	return false
}

// Claim implements [idem.Store].
func (f *failOnce) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if f.take("claim") {
		return idem.ClaimResult{}, errStoreDown
	}
	return f.Store.Claim(ctx, p)
}
