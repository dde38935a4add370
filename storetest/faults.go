package storetest

import (
	"context"
	"errors"
	"sync"

	"github.com/idemkit/idem"
)

// ErrAnswerLost is returned by [LossyStore] after the wrapped store applied a
// write whose answer is then dropped, as a network would.
var ErrAnswerLost = errors.New("storetest: answer lost after commit")

// LossyStore wraps a store and, for the operations named in Lose, lets the
// inner store apply the call and then returns ErrAnswerLost instead of its
// answer, the first N times. It models a store call that committed while its
// answer was lost on the network.
type LossyStore struct {
	idem.Store
	mu   sync.Mutex
	lose map[string]int
}

// NewLossyStore wraps s; lose maps an operation name ("claim", "finish",
// "release") to how many of its answers to drop.
func NewLossyStore(s idem.Store, lose map[string]int) *LossyStore {
	return &LossyStore{Store: s, lose: lose}
}

func (l *LossyStore) drop(op string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose[op] > 0 {
		l.lose[op]--
		return true
	}
	return false
}

// Claim implements [idem.Store].
func (l *LossyStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	r, err := l.Store.Claim(ctx, p)
	if err == nil && l.drop("claim") {
		return idem.ClaimResult{}, ErrAnswerLost
	}
	return r, err
}

// Finish implements [idem.Store].
func (l *LossyStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	r, err := l.Store.Finish(ctx, p)
	if err == nil && l.drop("finish") {
		return nil, ErrAnswerLost
	}
	return r, err
}

// Release implements [idem.Store].
func (l *LossyStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	err := l.Store.Release(ctx, p)
	if err == nil && l.drop("release") {
		return ErrAnswerLost
	}
	return err
}

// ErrCrashed is returned by [CrashStore] for writes after the crash point.
var ErrCrashed = errors.New("storetest: process crashed")

// CrashStore wraps a store and, once Crash is called, refuses every write
// without applying it, as if the process holding the attempt had died: the
// effect may have run but its outcome never reaches the store.
type CrashStore struct {
	idem.Store
	mu      sync.Mutex
	crashed bool
}

// Crash makes every later write fail with ErrCrashed.
func (c *CrashStore) Crash() { c.mu.Lock(); c.crashed = true; c.mu.Unlock() }

func (c *CrashStore) down() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.crashed }

// Finish implements [idem.Store].
func (c *CrashStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if c.down() {
		return nil, ErrCrashed
	}
	return c.Store.Finish(ctx, p)
}

// Release implements [idem.Store].
func (c *CrashStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	if c.down() {
		return ErrCrashed
	}
	return c.Store.Release(ctx, p)
}

// Heartbeat implements [idem.Store].
func (c *CrashStore) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if c.down() {
		return ErrCrashed
	}
	return c.Store.Heartbeat(ctx, p)
}

// Get implements [idem.Store]; a crashed process cannot read either.
func (c *CrashStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if c.down() {
		return nil, ErrCrashed
	}
	return c.Store.Get(ctx, scope, key)
}

// Phase is a point in claim → effect → record at which [PhaseStore] makes
// the process holding the attempt die.
type Phase int

const (
	// AfterClaim: the claim is written, its answer is lost and the
	// process dies; the effect never starts.
	AfterClaim Phase = iota
	// DuringEffect: the claim is answered, the effect runs, and nothing
	// after it reaches the store.
	DuringEffect
	// AfterEffect: the effect ended; its outcome is never written.
	AfterEffect
	// AfterRecord: the outcome is written, its answer is lost and the
	// process dies.
	AfterRecord
)

// String describes the phase for messages.
func (p Phase) String() string {
	switch p {
	case AfterClaim:
		return "after the claim"
	case DuringEffect:
		return "during the effect"
	case AfterEffect:
		return "after the effect, before its outcome was recorded"
	default:
		return "after the outcome was recorded, before the answer reached it"
	}
}

// PhaseStore is a [CrashStore] that crashes by itself at a phase of the
// first attempt it sees: from then on every call fails with ErrCrashed
// (Claim too), as for a dead process. A process restarted after the crash
// opens the wrapped store again.
type PhaseStore struct {
	*CrashStore
	at Phase
}

// NewPhaseStore wraps s to crash at at.
func NewPhaseStore(s idem.Store, at Phase) *PhaseStore {
	return &PhaseStore{CrashStore: &CrashStore{Store: s}, at: at}
}

// Claim implements [idem.Store].
func (p *PhaseStore) Claim(ctx context.Context, cp idem.ClaimParams) (idem.ClaimResult, error) {
	if p.down() {
		return idem.ClaimResult{}, ErrCrashed
	}
	r, err := p.CrashStore.Claim(ctx, cp)
	if err != nil || !r.Claimed {
		return r, err
	}
	switch p.at {
	case AfterClaim:
		p.Crash()
		return idem.ClaimResult{}, ErrCrashed
	case DuringEffect:
		p.Crash()
	}
	return r, nil
}

// Finish implements [idem.Store].
func (p *PhaseStore) Finish(ctx context.Context, fp idem.FinishParams) (*idem.Record, error) {
	switch {
	case p.down():
	case p.at == AfterEffect:
		p.Crash()
	case p.at == AfterRecord:
		_, err := p.CrashStore.Finish(ctx, fp)
		p.Crash()
		if err != nil {
			return nil, err
		}
		return nil, ErrAnswerLost
	}
	return p.CrashStore.Finish(ctx, fp)
}
