package idem_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestParkedGoroutineWaiterStack parks goroutines in DoBytes on a key this
// engine holds and bounds the stack each one keeps while parked. The
// caller's own frame is a plain `res, err := e.DoBytes(...)`: with the
// Request passed and the Result returned by value it is over 1 KiB, so 4 KiB
// is the least such a goroutine can have. The waiting path used to run
// under do and the claim loop, whose frames took every waiter to 8 KiB.
func TestParkedGoroutineWaiterStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector enlarges frames and stack guards")
	}
	for _, observe := range []bool{false, true} {
		var events [2]atomic.Int64 // wait events, replayed outcome events
		cfg := idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute}
		if observe {
			cfg.Observer = idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
				switch {
				case ev.Kind == idem.EventWait:
					events[0].Add(1)
				case ev.Kind == idem.EventOutcome && ev.Outcome == idem.OutcomeReplay:
					events[1].Add(1)
				}
			})
		}
		e := newEngine(t, memstore.New(), cfg)
		req := idem.Request{Key: "storm", Fingerprint: idem.Fingerprint{7}}
		release := holdKey(t, e, req, "v")

		const n = 2000
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before, goroutines := ms.StackInuse, runtime.NumGoroutine()
		var wg sync.WaitGroup
		var good atomic.Int64
		wg.Add(n)
		for range n {
			go func() {
				defer wg.Done()
				res, err := e.DoBytes(context.Background(), req, ok("dup"))
				if err == nil && res.Replayed && string(res.Value) == "v" {
					good.Add(1)
				}
			}()
		}
		for runtime.NumGoroutine() < goroutines+n {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // let the last ones reach the parking point
		runtime.ReadMemStats(&ms)
		perWaiter := (int64(ms.StackInuse) - int64(before)) / n
		if err := release(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if good.Load() != n {
			t.Fatalf("observe=%v: %d of %d waiters replayed the outcome", observe, good.Load(), n)
		}
		if observe && (events[0].Load() != n || events[1].Load() != n) {
			t.Fatalf("observed %d waits and %d replays for %d waiters", events[0].Load(), events[1].Load(), n)
		}
		t.Logf("observe=%v: %d B of stack per parked waiter", observe, perWaiter)
		// 4 KiB each, with room for the few that a rare deeper path (a GC
		// assist while allocating the wait's timer) takes to 8 KiB.
		if perWaiter > 5<<10 {
			t.Fatalf("observe=%v: %d B of stack per parked goroutine waiter, want at most 5 KiB", observe, perWaiter)
		}
	}
}

// TestGoroutineWaiterOnHeldKey: a DoBytes duplicate of a key this engine
// holds answers as any waiter does — bounded by its wait, ended by its
// context, claiming the key once it is released (one of them runs), and
// refused after Close or without a handler.
func TestGoroutineWaiterOnHeldKey(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, memstore.New(), idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute})
	req := idem.Request{Key: "held", Fingerprint: idem.Fingerprint{3}}
	release := holdKey(t, e, req, "")

	short := req
	short.Policy.Wait = 20 * time.Millisecond
	if _, err := e.DoBytes(ctx, short, ok("x")); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("bounded wait: %v, want ErrInFlight", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := e.DoBytes(cctx, req, ok("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	if _, err := e.DoBytes(ctx, req, nil); err == nil {
		t.Fatalf("nil handler on a held key: %v, want an error", err)
	}

	const n = 20
	var ran, second atomic.Int64
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			r, err := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
				ran.Add(1)
				return []byte("second"), nil
			})
			if err == nil && string(r.Value) == "second" {
				second.Add(1)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := release(); !errors.Is(err, idem.ErrReleased) {
		t.Fatalf("holder: %v, want ErrReleased", err)
	}
	wg.Wait()
	if ran.Load() != 1 || second.Load() != n {
		t.Fatalf("after the release the effect ran %d times and %d of %d callers got its value, want 1 and all", ran.Load(), second.Load(), n)
	}

	other := idem.Request{Key: "held-at-close", Fingerprint: idem.Fingerprint{4}}
	release = holdKey(t, e, other, "v")
	e.Close()
	if _, err := e.DoBytes(ctx, other, ok("x")); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}
