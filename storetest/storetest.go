// Package storetest is the conformance suite every [idem.Store] runs.
//
// A backend's tests call [Run] with a [Harness] that makes fresh, isolated
// stores. The suite checks the store contract method by method (contract
// tests) and the engine's guarantees on top of the store with real
// concurrency (engine tests): replay, divergence, concurrency, crash at each
// phase, stale fences, release, retention, scope isolation and lost answers.
//
// [RaceEffects] is exported so that constraint-evidence tests can show the
// suite detects a store whose claim is not atomic.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Harness describes a store under test.
type Harness struct {
	// NewStore returns a fresh, empty, isolated store. The suite closes it.
	NewStore func(t *testing.T) idem.Store
	// NewPeer, when set, returns a second, independent instance (its own
	// connection pool or client) over the same data as st, as another
	// process would open it. The suite closes it. The cross-instance tests
	// race two engines through the pair and check that a waiter in one is
	// woken by the other with a bounded number of store reads.
	NewPeer func(t *testing.T, st idem.Store) idem.Store
	// Deadline bounds each test of the suite (see [Deadline]): a store
	// that blocks fails the run with every goroutine's stack instead of
	// hanging it. Defaults to DefaultDeadline (2m).
	Deadline time.Duration
}

// Run runs the whole conformance suite.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("storetest: Harness.NewStore is nil")
	}
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, h) })
	t.Run("CrossInstance", func(t *testing.T) { runCrossClient(t, h) })
	t.Run("SkewedClocks", func(t *testing.T) { runClocks(t, h) })
}

// open returns a fresh store closed at the end of the test.
func (h Harness) open(t *testing.T) idem.Store {
	t.Helper()
	s := h.NewStore(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Clock is a settable clock for engine tests, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at the current time, truncated to microseconds.
func NewClock() *Clock { return &Clock{t: time.Now().UTC().Truncate(time.Microsecond)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func fp(s string) idem.Fingerprint { return idem.NewFingerprint([]byte(s)) }

// RaceReport is what [RaceReport] found.
type RaceReport struct {
	// Extra is how many effects ran beyond one per key; 0 is correct.
	Extra int
	// Missing is how many keys never ran their effect.
	Missing int
	// Errors counts calls that ended in an error other than an in-flight
	// conflict (which is retried); FirstErr is the first of them.
	Errors   int
	FirstErr error
}

// Race races goroutines callers through an [idem.Engine] on st: each caller
// walks all keys in a rotated order, so callers collide, asking the engine
// to run an effect that counts itself. In-flight conflicts are retried until
// every key is decided.
func Race(t *testing.T, st idem.Store, goroutines, keys int) RaceReport {
	t.Helper()
	return raceEngines(t, []idem.Store{st}, goroutines, keys)
}

// RaceEffects runs [Race] and returns how many effects ran beyond one per
// key (0 is correct). Errors are logged, not failed: constraint-evidence
// tests run it against deliberately broken stores.
func RaceEffects(t *testing.T, st idem.Store, goroutines, keys int) (extra int) {
	t.Helper()
	rep := Race(t, st, goroutines, keys)
	if rep.Errors > 0 {
		t.Logf("RaceEffects: %d errors, first: %v", rep.Errors, rep.FirstErr)
	}
	return rep.Extra
}
