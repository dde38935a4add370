package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// WaiterResult is what the waiters scenario measured: Waiters InFlightWait
// callers parked on one key held for Hold, then released.
type WaiterResult struct {
	// Mode is how the waiters call the engine: WaitersAsync (DoAsync: a
	// parked duplicate is a small record on the shared watch) or
	// WaitersGoroutines (DoBytes from a goroutine each, parked in the call).
	Mode    string        `json:"mode"`
	Waiters int           `json:"waiters"`
	Hold    time.Duration `json:"hold_ns"`
	// Replayed counts the waiters that got the recorded outcome (all of
	// them, or the run fails).
	Replayed int `json:"replayed"`
	// JoinClaims is the store claims the waiters made before parking. The
	// key is held by this engine, so a waiter learns that it is in flight
	// without asking the store: 0.
	JoinClaims int64 `json:"join_claims"`
	// WatchReads is the store reads made while the key was held: the one
	// shared watch of the key, whatever the number of waiters.
	WatchReads int64 `json:"watch_reads"`
	// WakeClaims and WakeReads are the store calls after the release, until
	// every waiter returned.
	WakeClaims int64 `json:"wake_claims"`
	WakeReads  int64 `json:"wake_reads"`
	// WakeDuration is from the release until the last waiter returned.
	WakeDuration time.Duration `json:"wake_ns"`
	// RSSBeforeKiB is the resident set before the waiters started;
	// PeakRSSKiB the peak (VmHWM) from then until they all returned.
	RSSBeforeKiB int64 `json:"rss_before_kib"`
	PeakRSSKiB   int64 `json:"peak_rss_kib"`
	// PeakExact is false when the peak could not be reset before the storm
	// (then PeakRSSKiB is the whole process's peak).
	PeakExact bool `json:"peak_exact"`
	// StackKiB and HeapKiB are the Go runtime's stack and heap in use while
	// the waiters were parked; Goroutines the goroutine count then.
	StackKiB int64 `json:"stack_kib"`
	// StackAfterGCKiB is the stack in use after a collection while the
	// waiters are still parked: the runtime shrinks stacks that grew during
	// the call but are mostly unused at the parking point.
	StackAfterGCKiB int64 `json:"stack_after_gc_kib"`
	HeapKiB         int64 `json:"heap_kib"`
	Goroutines      int   `json:"goroutines"`
}

// Waiter modes, see WaiterResult.Mode.
const (
	WaitersAsync      = "async"
	WaitersGoroutines = "goroutines"
)

// countingStore counts the store calls the waiters scenario cares about.
type countingStore struct {
	idem.Store
	claims, gets atomic.Int64
}

// Claim and Get count completed calls: with thousands of runnable
// goroutines, a call counted on entry may run long after.
func (c *countingStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	defer c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *countingStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	defer c.gets.Add(1)
	return c.Store.Get(ctx, scope, key)
}

// notifyingCountingStore keeps the store's notifications visible to the
// engine through the wrapper.
type notifyingCountingStore struct {
	*countingStore
	n idem.Notifier
}

func (s notifyingCountingStore) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	return s.n.Subscribe(ctx, scope, key)
}

func countStore(st idem.Store) (idem.Store, *countingStore) {
	c := &countingStore{Store: st}
	if n, ok := st.(idem.Notifier); ok {
		return notifyingCountingStore{c, n}, c
	}
	return c, c
}

// runWaiters holds one key, parks n InFlightWait callers on it, records the
// outcome after hold, and checks that every waiter replays it.
func runWaiters(ctx context.Context, st idem.Store, mode string, n int, hold time.Duration, payload []byte) (*WaiterResult, error) {
	wrapped, cnt := countStore(st)
	eng, err := idem.New(wrapped, idem.Config{InFlight: idem.InFlightWait, Wait: hold + time.Minute,
		ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}, AllowVolatileStore: true, AllowAsyncReplication: true}) // scratch records
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	key := idem.Key("w-" + scratchName()) //idem:ignore keyentropy,sharednamespace a benchmark's scratch key: each run is a new intent on purpose, nothing retries it
	req := idem.Request{Scope: benchScope, Key: key, Fingerprint: idem.Fingerprint(benchFingerprint), Operation: "bench-wait"}
	started, release := make(chan struct{}), make(chan struct{})
	holderDone := make(chan error, 1)
	go func() {
		_, err := eng.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return payload, nil
		})
		holderDone <- err
	}()
	select {
	case <-started:
	case err := <-holderDone:
		return nil, fmt.Errorf("holder: %w", err)
	}
	res := &WaiterResult{Mode: mode, Waiters: n, Hold: hold}
	runtime.GC()
	debug.FreeOSMemory()
	res.RSSBeforeKiB, _ = procStatusKiB("VmRSS")
	res.PeakExact = resetPeakRSS()
	cnt.claims.Store(0)
	cnt.gets.Store(0)
	holdStart := time.Now()

	var replayed, entered atomic.Int64
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	effect := func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, errors.New("a waiter ran the effect")
	}
	answer := func(r idem.Result, err error) {
		defer wg.Done()
		if err == nil && !r.Replayed {
			err = errEffectOnReplay
		}
		if err != nil {
			select {
			case errc <- err:
			default:
			}
			return
		}
		replayed.Add(1)
	}
	wg.Add(n)
	if mode == WaitersAsync {
		for range n {
			entered.Add(1)
			eng.DoAsync(ctx, req, effect, answer)
		}
	} else {
		for range n {
			go func() {
				entered.Add(1)
				answer(eng.DoBytes(ctx, req, effect))
			}()
		}
	}
	// Every waiter has called the engine before the hold ends (a waiter
	// still running then would not be parked: the run fails below).
	for entered.Load() < int64(n) && time.Since(holdStart) < hold+time.Minute {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(max(0, hold-time.Since(holdStart)))
	res.JoinClaims = cnt.claims.Load()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.StackKiB, res.HeapKiB, res.Goroutines = int64(ms.StackInuse>>10), int64(ms.HeapInuse>>10), runtime.NumGoroutine()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	res.StackAfterGCKiB = int64(ms.StackInuse >> 10)
	res.WatchReads = cnt.gets.Load()
	claimsAtRelease := cnt.claims.Load()

	wake := time.Now()
	close(release)
	if err := <-holderDone; err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	wg.Wait()
	res.WakeDuration = time.Since(wake)
	res.WakeClaims = cnt.claims.Load() - claimsAtRelease
	res.WakeReads = cnt.gets.Load() - res.WatchReads
	res.PeakRSSKiB, _ = procStatusKiB("VmHWM")
	res.Replayed = int(replayed.Load())
	select {
	case err := <-errc:
		return res, fmt.Errorf("waiter: %w", err)
	default:
	}
	return res, nil
}
