package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// runCrossClient races two engines, each over its own store instance (own
// connection pool or client) on the same data, and checks that a waiter in
// one is woken by the other's outcome with a bounded number of reads.
func runCrossClient(t *testing.T, h Harness) {
	if h.NewPeer == nil {
		t.Skip("storetest: Harness.NewPeer not set: this store has no second instance to race")
	}
	t.Run("RaceTwoInstances", func(t *testing.T) {
		Deadline(t, h.deadline())
		a := h.open(t)
		b := h.NewPeer(t, a)
		t.Cleanup(func() { _ = b.Close() })
		rep := raceEngines(t, []idem.Store{a, b}, 16, 60)
		if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
			t.Fatalf("two instances: %d duplicate effects, %d keys never run, %d errors (first: %v)",
				rep.Extra, rep.Missing, rep.Errors, rep.FirstErr)
		}
	})
	t.Run("WaiterWokenAcrossInstances", func(t *testing.T) {
		Deadline(t, h.deadline())
		a := h.open(t)
		b := h.NewPeer(t, a)
		t.Cleanup(func() { _ = b.Close() })
		crossWaiter(t, a, b)
	})
}

// getCounter counts Get calls on a store and passes Subscribe through when
// the store can notify.
type getCounter struct {
	idem.Store
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	g.gets.Add(1)
	return g.Store.Get(ctx, scope, key)
}

type notifyingCounter struct {
	*getCounter
	n idem.Notifier
}

func (n notifyingCounter) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	return n.n.Subscribe(ctx, scope, key)
}

// crossHold is how long the first attempt of crossWaiter runs while the
// waiters wait: long enough that reads which grow with the wait (a store
// that signals its subscribers every second) exceed the notifier's limit.
const crossHold = 6 * time.Second

func crossWaiter(t *testing.T, a, b idem.Store) {
	ctx := ctxT(t)
	holder, err := idem.New(a, idem.Config{Lease: time.Minute, AllowVolatileStore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	gc := &getCounter{Store: b}
	var waiterStore idem.Store = gc
	notifier, notifies := b.(idem.Notifier)
	if notifies {
		waiterStore = notifyingCounter{gc, notifier}
	}
	// Without notifications the waiter polls with capped backoff up to 1s;
	// with them, polling is only a 1-minute fallback.
	pollMax := time.Second
	if notifies {
		pollMax = time.Minute
	}
	waiter, err := idem.New(waiterStore, idem.Config{AllowVolatileStore: true, InFlight: idem.InFlightWait, Wait: 30 * time.Second, PollMin: 10 * time.Millisecond, PollMax: pollMax})
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	r := idem.Request{Scope: "x", Key: "cross", Fingerprint: fp("b")}
	started := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_, _ = holder.DoBytes(ctx, r, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("from-a"), nil
		})
	}()
	<-started
	const waiters = 20
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := waiter.DoBytes(ctx, r, func(context.Context, *idem.Attempt) ([]byte, error) {
				return []byte("from-b"), nil
			})
			if err != nil || string(res.Value) != "from-a" || !res.Replayed {
				errs <- fmt.Errorf("waiter got %q replayed=%v err=%v, want the replay of from-a", res.Value, res.Replayed, err)
			}
		}()
	}
	time.Sleep(crossHold) // the first attempt takes a while
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Reads: one claim-miss read per waiter is not a Get; the shared watch
	// reads once per wake-up. With notifications: the first read and one per
	// notification, however long the wait — a store that also signals on a
	// timer (say every second) goes over 5 at this hold. Polling (10ms
	// doubling to 1s): 8 reads in the first 1.27s, then one a second, so 12
	// over the 6s hold and one after the release: about 13, growing with
	// the wait as polling does, but not with the number of waiters (20
	// waiters reading for themselves would make hundreds).
	limit := int64(16)
	if notifies {
		limit = 5
	}
	got := gc.gets.Load()
	t.Logf("%d waiters over %s: %d store reads in all (notifier: %v)", waiters, crossHold, got, notifies)
	if got > limit {
		t.Fatalf("%d store reads for %d waiters over %s, want at most %d: reads grow with waiters or wait time", got, waiters, crossHold, limit)
	}
}

// raceEngines is Race over several engines, one per store, callers spread
// across them.
func raceEngines(t *testing.T, stores []idem.Store, goroutines, keys int) RaceReport {
	t.Helper()
	ctx := ctxT(t)
	engines := make([]*idem.Engine, len(stores))
	for i, st := range stores {
		e, err := idem.New(st, idem.Config{Lease: time.Minute, InFlight: idem.InFlightReject, AllowVolatileStore: true}) // test servers may run without persistence
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		engines[i] = e
	}
	counts := make([]atomic.Int64, keys)
	var errs atomic.Int64
	var errMu sync.Mutex
	var firstErr error // errors of different types: no atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eng := engines[g%len(engines)]
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
					if errors.Is(err, idem.ErrInFlight) {
						time.Sleep(time.Millisecond)
						continue
					}
					errs.Add(1)
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	rep := RaceReport{Errors: int(errs.Load()), FirstErr: firstErr}
	for k := range counts {
		if c := counts[k].Load(); c > 1 {
			rep.Extra += int(c - 1)
		} else if c == 0 {
			rep.Missing++
		}
	}
	return rep
}
