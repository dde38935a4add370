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

// holdKey starts an effect for req on e that runs until release is closed.
func holdKey(t *testing.T, e *idem.Engine, req idem.Request, value string) (release func() error) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(context.Background(), req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-rel
			if value == "" {
				return nil, idem.Release(errors.New("nothing done"))
			}
			return []byte(value), nil
		})
		errc <- err
	}()
	<-started
	return func() error { close(rel); return <-errc }
}

// asyncCalls collects DoAsync answers and counts how often each was given.
type asyncCalls struct {
	mu    sync.Mutex
	calls map[int]int
	res   map[int]idem.Result
	errs  map[int]error
	wg    sync.WaitGroup
}

func newAsyncCalls(n int) *asyncCalls {
	a := &asyncCalls{calls: map[int]int{}, res: map[int]idem.Result{}, errs: map[int]error{}}
	a.wg.Add(n)
	return a
}

func (a *asyncCalls) done(i int) func(idem.Result, error) {
	return func(r idem.Result, err error) {
		a.mu.Lock()
		a.calls[i]++
		first := a.calls[i] == 1
		a.res[i], a.errs[i] = r, err
		a.mu.Unlock()
		if first {
			a.wg.Done()
		}
	}
}

func (a *asyncCalls) wait(t *testing.T) {
	t.Helper()
	ch := make(chan struct{})
	go func() { a.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("DoAsync callers were not all answered")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.calls {
		if c != 1 {
			t.Errorf("caller %d answered %d times", i, c)
		}
	}
}

// TestDoAsyncParksDuplicatesWithoutGoroutines: duplicates of a key this
// engine runs are parked as records on the shared watch — no goroutine and
// no store claim each — and all replay the one outcome.
func TestDoAsyncParksDuplicatesWithoutGoroutines(t *testing.T) {
	cs := &countingStore{inner: memstore.New()}
	e := newEngine(t, cs, idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute})
	req := idem.Request{Key: "storm", Fingerprint: idem.Fingerprint{7}}
	release := holdKey(t, e, req, "v")
	base := runtime.NumGoroutine()
	const n = 2000
	a := newAsyncCalls(n)
	for i := range n {
		e.DoAsync(context.Background(), req, func(context.Context, *idem.Attempt) ([]byte, error) {
			return nil, errors.New("a parked duplicate ran the effect")
		}, a.done(i))
	}
	if g := runtime.NumGoroutine(); g > base+20 {
		t.Fatalf("%d goroutines for %d parked duplicates (was %d): DoAsync parks goroutines", g, n, base)
	}
	if c := cs.claims.Load(); c != 1 {
		t.Fatalf("%d store claims, want 1 (the holder's)", c)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	for i := range n {
		if r, err := a.res[i], a.errs[i]; err != nil || !r.Replayed || string(r.Value) != "v" {
			t.Fatalf("caller %d: %+v, %v; want a replay of v", i, r, err)
		}
	}
	if c := cs.claims.Load(); c != 1 {
		t.Fatalf("%d store claims in all, want 1", c)
	}
}

// TestDoAsyncBoundsAndCancel: a parked duplicate is answered with
// ErrInFlight when its wait bound passes and with ctx's error when ctx ends,
// once each, while the holder still runs.
func TestDoAsyncBoundsAndCancel(t *testing.T) {
	e := newEngine(t, memstore.New(), idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute})
	req := idem.Request{Key: "slow", Fingerprint: idem.Fingerprint{1}}
	release := holdKey(t, e, req, "v")
	defer release()

	a := newAsyncCalls(2)
	short := req
	short.Policy.Wait = 20 * time.Millisecond
	e.DoAsync(context.Background(), short, ok("x"), a.done(0))
	ctx, cancel := context.WithCancel(context.Background())
	e.DoAsync(ctx, req, ok("x"), a.done(1))
	cancel()
	a.wait(t)
	if !errors.Is(a.errs[0], idem.ErrInFlight) {
		t.Errorf("bounded wait: %v, want ErrInFlight", a.errs[0])
	}
	if !errors.Is(a.errs[1], context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", a.errs[1])
	}
}

// TestDoAsyncAfterRelease: when the holder releases the key, a parked
// duplicate claims it and runs its own effect, exactly one of them.
func TestDoAsyncAfterRelease(t *testing.T) {
	e := newEngine(t, memstore.New(), idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute})
	req := idem.Request{Key: "freed", Fingerprint: idem.Fingerprint{3}}
	release := holdKey(t, e, req, "")
	const n = 20
	var ran atomic.Int64
	a := newAsyncCalls(n)
	for i := range n {
		e.DoAsync(context.Background(), req, func(context.Context, *idem.Attempt) ([]byte, error) {
			ran.Add(1)
			return []byte("second"), nil
		}, a.done(i))
	}
	if err := release(); !errors.Is(err, idem.ErrReleased) {
		t.Fatalf("holder: %v, want ErrReleased", err)
	}
	a.wait(t)
	if ran.Load() != 1 {
		t.Fatalf("the effect ran %d times after the release, want 1", ran.Load())
	}
	for i := range n {
		if r, err := a.res[i], a.errs[i]; err != nil || string(r.Value) != "second" {
			t.Fatalf("caller %d: %+v, %v", i, r, err)
		}
	}
}

// TestDoAsyncRunsNewKeys: a request that is not a parked duplicate runs like
// DoBytes, including its errors.
func TestDoAsyncRunsNewKeys(t *testing.T) {
	e := newEngine(t, memstore.New(), idem.Config{})
	a := newAsyncCalls(2)
	e.DoAsync(context.Background(), idem.Request{Key: "new"}, ok("first"), a.done(0))
	e.DoAsync(context.Background(), idem.Request{Key: "bad\nkey"}, ok("x"), a.done(1))
	a.wait(t)
	if r, err := a.res[0], a.errs[0]; err != nil || r.Replayed || string(r.Value) != "first" {
		t.Fatalf("new key: %+v, %v", r, err)
	}
	if !errors.Is(a.errs[1], idem.ErrInvalidKey) {
		t.Fatalf("invalid key: %v, want ErrInvalidKey", a.errs[1])
	}
}
