package idem_test

// Tests for engine guards a mutation-testing run found unchecked: the
// retention boundary, the replay cache's MaxAge and its refill during a
// forced resolution, finishing under a context that outlives the caller,
// and a fenced effect that returns an error of its own.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestRetentionBoundary: a TTL one second (or one nanosecond) short of a
// window it must cover is refused with a *RetentionError naming it; a TTL
// exactly equal to the window covers it.
func TestRetentionBoundary(t *testing.T) {
	const window = 7 * 24 * time.Hour
	cover := map[string]time.Duration{"client-retries": time.Hour, "dispute": window}
	for _, short := range []time.Duration{window - time.Second, window - time.Nanosecond} {
		_, err := idem.New(memstore.New(), idem.Config{TTL: short, Cover: cover})
		var re *idem.RetentionError
		if !errors.As(err, &re) || re.Window != "dispute" || re.Need != window || re.TTL != short {
			t.Fatalf("TTL %s for a %s window: err = %v, want a *RetentionError naming dispute", short, window, err)
		}
		if !errors.Is(err, idem.ErrRetentionTooShort) {
			t.Fatalf("TTL %s: %v is not ErrRetentionTooShort", short, err)
		}
	}
	e, err := idem.New(memstore.New(), idem.Config{TTL: window, Cover: cover})
	if err != nil {
		t.Fatalf("TTL equal to the window refused: %v", err)
	}
	e.Close()
	if err := idem.ValidateRetention(window, cover); err != nil {
		t.Fatalf("ValidateRetention(window, window) = %v", err)
	}
}

// TestReplayCacheMaxAgeRereadsTheStore: on a shared store a forced
// correction made by another process (here: directly on the store, past
// the engine) is seen once the cached entry is older than MaxAge. The cache
// ages its entries by the wall clock, so the test waits.
func TestReplayCacheMaxAgeRereadsTheStore(t *testing.T) {
	const maxAge = 100 * time.Millisecond
	ctx := context.Background()
	st := &claimCounter{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{TTL: time.Hour, ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, MaxAge: maxAge, CacheRecorded: true}})
	req := idem.Request{Key: "k"}
	start := time.Now()
	if _, err := e.DoBytes(ctx, req, ok("v")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.Store.Resolve(ctx, idem.ResolveParams{Key: "k", To: idem.StateSucceeded, AttemptID: "elsewhere",
		From:   []idem.State{idem.StateSucceeded, idem.StateFailed, idem.StateUnknown, idem.StateInProgress},
		Result: []byte("corrected"), Now: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r, err := e.DoBytes(ctx, req, ok("x"))
	if err != nil || !r.Replayed {
		t.Fatalf("replay = %+v, %v", r, err)
	}
	if time.Since(start) < maxAge/2 && string(r.Value) != "v" {
		// Within MaxAge the cache is trusted: this shows the entry was cached.
		t.Fatalf("replay within MaxAge = %q, want the cached %q", r.Value, "v")
	}
	time.Sleep(3 * maxAge)
	r, err = e.DoBytes(ctx, req, ok("x"))
	if err != nil || !r.Replayed || string(r.Value) != "corrected" {
		t.Fatalf("replay after MaxAge = %+v, %v; want the corrected record from the store", r, err)
	}
}

// refillingStore replays a key through the engine while a forced Resolve
// of it is under way, before the store changes the record: that replay
// caches the old outcome.
type refillingStore struct {
	*memstore.Store
	e       *idem.Engine
	req     idem.Request
	once    atomic.Bool
	refills atomic.Int64
}

func (s *refillingStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	if s.e != nil && s.once.CompareAndSwap(false, true) {
		if r, err := s.e.DoBytes(ctx, s.req, ok("x")); err == nil && r.Replayed && string(r.Value) == "v" {
			s.refills.Add(1)
		}
	}
	return s.Store.Resolve(ctx, p)
}

// TestResolveInvalidatesARefilledCacheEntry: a replay that refills the
// cache with the old record while a forced resolution is running does not
// leave that stale outcome cached once Resolve returns.
func TestResolveInvalidatesARefilledCacheEntry(t *testing.T) {
	ctx := context.Background()
	st := &refillingStore{Store: memstore.New(), req: idem.Request{Key: "k"}}
	e := newEngine(t, st, idem.Config{TTL: time.Hour, ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, MaxAge: time.Hour, CacheRecorded: true}})
	st.e = e
	if _, err := e.DoBytes(ctx, st.req, ok("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateSucceeded, Result: []byte("corrected"), Force: true, Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if st.refills.Load() != 1 {
		t.Fatal("the replay during Resolve did not read the old record")
	}
	r, err := e.DoBytes(ctx, st.req, ok("x"))
	if err != nil || !r.Replayed || string(r.Value) != "corrected" {
		t.Fatalf("replay after Resolve = %+v, %v; want the resolved outcome, not the refilled stale one", r, err)
	}
}

// TestCallerCancelledDuringEffectStillRecordsSuccess: the caller's context
// ends while the effect runs; an effect that finishes anyway has its value
// recorded, under the finishing context that outlives the cancellation.
func TestCallerCancelledDuringEffectStillRecordsSuccess(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		cancel()
		return []byte("charged"), nil
	})
	if err != nil || r.State != idem.StateSucceeded || string(r.Value) != "charged" {
		t.Fatalf("DoBytes = %+v, %v; want succeeded with the value", r, err)
	}
	rec, err := st.Get(context.Background(), "", "k")
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "charged" {
		t.Fatalf("stored record = %+v, %v; want succeeded %q", rec, err, "charged")
	}
}

// cancellingClaimStore cancels the caller's context while Claim runs, after
// the claim is written; with lose set it also loses the answer, returning
// the context's error as a network driver would.
type cancellingClaimStore struct {
	*memstore.Store
	cancel context.CancelFunc
	lose   bool
}

func (s *cancellingClaimStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	cr, err := s.Store.Claim(ctx, p)
	s.cancel()
	if err == nil && s.lose {
		return idem.ClaimResult{}, ctx.Err()
	}
	return cr, err
}

// TestCancelDuringClaimLeavesNoClaim: a caller cancelled while its claim
// is being written leaves no in_progress record behind, whether the claim's
// answer arrived (the claim is released before the effect starts) or was
// lost (the engine finds its own claim and releases it): both run under a
// context that outlives the cancellation.
func TestCancelDuringClaimLeavesNoClaim(t *testing.T) {
	for _, lose := range []bool{false, true} {
		mem := memstore.New()
		ctx, cancel := context.WithCancel(context.Background())
		st := &cancellingClaimStore{Store: mem, cancel: cancel, lose: lose}
		e := newEngine(t, st, idem.Config{})
		ran := false
		_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
			ran = true
			return []byte("v"), nil
		})
		if !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("lost answer %v: DoBytes = %v (ran=%v), want context.Canceled before the effect", lose, err, ran)
		}
		if mem.Writes() == 0 {
			t.Fatalf("lost answer %v: the claim was never written", lose)
		}
		if rec, err := mem.Get(context.Background(), "", "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("lost answer %v: a cancelled claim left %+v, %v; want no record", lose, rec, err)
		}
	}
}

// TestHeartbeatFencedEffectErrorIsUnknown: a handler whose context is
// cancelled because the heartbeat found its claim taken over, and which
// returns an error of its own rather than ctx.Err(), ends with an unknown
// outcome: it is never recorded (or reported) as failed.
func TestHeartbeatFencedEffectErrorIsUnknown(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{Lease: 90 * time.Millisecond})
	ctx := context.Background()
	started := make(chan struct{})
	var cause error
	done := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			close(started)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			cause = context.Cause(ctx)
			return nil, errors.New("aborted")
		})
		done <- err
	}()
	<-started
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("taken over"), Force: true}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(cause, idem.ErrFenced) {
		t.Fatalf("effect context cause = %v, want ErrFenced", cause)
	}
	if !errors.Is(err, idem.ErrUnknownOutcome) || errors.Is(err, idem.ErrRecordedFailure) {
		t.Fatalf("DoBytes = %v, want an unknown outcome, not a failure", err)
	}
	rec, gerr := st.Get(ctx, "", "k")
	if gerr != nil || rec.State != idem.StateFailed || string(rec.Result) != "taken over" {
		t.Fatalf("record = %+v, %v; want the operator's resolution untouched", rec, gerr)
	}
}
