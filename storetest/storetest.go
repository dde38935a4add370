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
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Harness describes a store under test.
type Harness struct {
	// NewStore returns a fresh, empty, isolated store. The suite closes it.
	NewStore func(t *testing.T) idem.Store
}

// Run runs the whole conformance suite.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("storetest: Harness.NewStore is nil")
	}
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, h) })
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
	ctx := ctxT(t)
	eng, err := idem.New(st, idem.Config{Lease: time.Minute, InFlight: idem.InFlightReject})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	counts := make([]atomic.Int64, keys)
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < keys; i++ {
				k := (i + g*7) % keys
				key := idem.Key(fmt.Sprintf("race:v1:%d", k))
				for attempt := 0; attempt < 10000; attempt++ {
					_, err := eng.DoBytes(ctx, idem.Request{Scope: "race", Key: key, Fingerprint: fp("same")},
						func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
							counts[k].Add(1)
							return []byte("ok"), nil
						})
					if err == nil {
						break
					}
					if errorsIsInFlight(err) {
						time.Sleep(time.Millisecond)
						continue
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					break
				}
			}
		}()
	}
	wg.Wait()
	rep := RaceReport{Errors: int(errs.Load())}
	if e, ok := firstErr.Load().(error); ok {
		rep.FirstErr = e
	}
	for k := range counts {
		if c := counts[k].Load(); c > 1 {
			rep.Extra += int(c - 1)
		} else if c == 0 {
			rep.Missing++
		}
	}
	return rep
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
