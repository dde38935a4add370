package idem_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestDoAsyncHundredThousandWaitersMemory: 100,000 InFlightWait duplicates
// parked by DoAsync across 10,000 keys whose effects are running in the
// same engine add at most 256 MiB of Go memory (heap in use and goroutine
// stacks, read with runtime.ReadMemStats after a collection, with the
// effects running and then with every waiter parked); every waiter then
// replays its key's outcome. Not run with -race, which multiplies the
// memory of every goroutine and allocation.
func TestDoAsyncHundredThousandWaitersMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("memory ceilings do not hold under -race")
	}
	if testing.Short() {
		t.Skip("parks 100,000 callers")
	}
	const keys, perKey = 10_000, 10
	const ceiling = 256 << 20
	e := newEngine(t, memstore.New(), idem.Config{InFlight: idem.InFlightWait, Wait: 10 * time.Minute,
		ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(keys)
	holders := make(chan error, keys)
	reqs := make([]idem.Request, keys)
	for k := range keys {
		reqs[k] = idem.Request{Key: idem.Key(fmt.Sprintf("storm-%05d", k)), Fingerprint: idem.Fingerprint{byte(k), byte(k >> 8)}}
		go func() {
			_, err := e.DoBytes(context.Background(), reqs[k], func(context.Context, *idem.Attempt) ([]byte, error) {
				started.Done()
				<-release
				return []byte(reqs[k].Key), nil
			})
			holders <- err
		}()
	}
	started.Wait()
	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)
	t.Logf("%d running keys: heap in use %.1f MiB, stacks %.1f MiB, %d goroutines",
		keys, float64(held.HeapInuse)/(1<<20), float64(held.StackInuse)/(1<<20), runtime.NumGoroutine())

	var answered, replayed atomic.Int64
	var wrong atomic.Value
	var all sync.WaitGroup
	all.Add(keys * perKey)
	effect := func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, errors.New("a parked duplicate ran the effect")
	}
	for i := range keys * perKey {
		k := i % keys // the callback holds an index, not a copy of the request
		e.DoAsync(context.Background(), reqs[k], effect, func(r idem.Result, err error) {
			defer all.Done()
			answered.Add(1)
			if err == nil && r.Replayed && string(r.Value) == string(reqs[k].Key) {
				replayed.Add(1)
			} else {
				wrong.Store(fmt.Sprintf("%s: %+v, %v", reqs[k].Key, r, err))
			}
		})
	}
	runtime.GC()
	var parked runtime.MemStats
	runtime.ReadMemStats(&parked)
	used := parked.HeapInuse + parked.StackInuse
	base := before.HeapInuse + before.StackInuse
	t.Logf("%d waiters on %d running keys: heap in use %.1f MiB, stacks %.1f MiB (%.1f MiB before), %d goroutines",
		keys*perKey, keys, float64(parked.HeapInuse)/(1<<20), float64(parked.StackInuse)/(1<<20), float64(base)/(1<<20), runtime.NumGoroutine())
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d waiters answered before any key was released", n)
	}
	close(release)
	done := make(chan struct{})
	go func() { all.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("%d of %d waiters answered", answered.Load(), keys*perKey)
	}
	for range keys {
		if err := <-holders; err != nil {
			t.Fatal(err)
		}
	}
	if w := wrong.Load(); w != nil {
		t.Fatalf("a waiter did not replay its key: %v", w)
	}
	// The ceiling is on what the waiters add: the running effects are the
	// application's (here ~16 KiB of stack each, 10,000 of them).
	waiters := used - (held.HeapInuse + held.StackInuse)
	t.Logf("the waiters' share: %.1f MiB (%.0f B a waiter); the whole process: %.1f MiB",
		float64(waiters)/(1<<20), float64(waiters)/(keys*perKey), float64(used)/(1<<20))
	if waiters > ceiling {
		t.Fatalf("100,000 parked waiters added %.1f MiB of heap and stacks, ceiling 256 MiB", float64(waiters)/(1<<20))
	}
}
