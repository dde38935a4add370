package idemtest

import (
	"context"
	"errors"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
)

// phase is a point in claim → effect → record at which a process dies.
type phase int

const (
	afterClaim   phase = iota // the claim is written; the effect never starts
	duringEffect              // the effect runs; nothing after the claim is written
	afterEffect               // the effect ended; its outcome is never written
	afterRecord               // the outcome is written; its answer is lost
)

func (p phase) String() string {
	switch p {
	case afterClaim:
		return "after the claim"
	case duringEffect:
		return "during the effect"
	case afterEffect:
		return "after the effect, before its outcome was recorded"
	default:
		return "after the outcome was recorded, before the answer reached it"
	}
}

// phaseStore is a [storetest.CrashStore] that crashes by itself at a phase:
// from then on every write and read fails, as for a dead process.
type phaseStore struct {
	*storetest.CrashStore
	at phase
	mu sync.Mutex
	// dead is set once the crash happened (CrashStore does not say).
	dead bool
}

func newPhaseStore(s idem.Store, at phase) *phaseStore {
	return &phaseStore{CrashStore: &storetest.CrashStore{Store: s}, at: at}
}

func (p *phaseStore) crash() {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	p.Crash()
}

func (p *phaseStore) crashed() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.dead }

// Claim implements [idem.Store].
func (p *phaseStore) Claim(ctx context.Context, cp idem.ClaimParams) (idem.ClaimResult, error) {
	if p.crashed() {
		return idem.ClaimResult{}, storetest.ErrCrashed
	}
	r, err := p.CrashStore.Claim(ctx, cp)
	if err != nil || !r.Claimed {
		return r, err
	}
	switch p.at {
	case afterClaim:
		p.crash()
		return idem.ClaimResult{}, storetest.ErrCrashed
	case duringEffect:
		p.crash()
	}
	return r, nil
}

// Finish implements [idem.Store].
func (p *phaseStore) Finish(ctx context.Context, fp idem.FinishParams) (*idem.Record, error) {
	switch {
	case p.crashed():
	case p.at == afterEffect:
		p.crash()
	case p.at == afterRecord:
		_, err := p.CrashStore.Finish(ctx, fp)
		p.crash()
		if err != nil {
			return nil, err
		}
		return nil, storetest.ErrAnswerLost
	}
	return p.CrashStore.Finish(ctx, fp)
}

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
