package idem_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func newEngine(t *testing.T, st idem.Store, cfg idem.Config) *idem.Engine {
	t.Helper()
	e, err := idem.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func ok(v string) idem.Handler {
	return func(context.Context, *idem.Attempt) ([]byte, error) { return []byte(v), nil }
}

func TestInvalidKeysAreRefusedBeforeAnything(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	for _, k := range []string{"", strings.Repeat("k", 256), "new\nline", "tab\tkey", "caf\u00e9", "del\x7f"} {
		ran := false
		_, err := e.DoBytes(context.Background(), idem.Request{Key: idem.Key(k)}, func(context.Context, *idem.Attempt) ([]byte, error) {
			ran = true
			return nil, nil
		})
		var ke *idem.KeyError
		if !errors.Is(err, idem.ErrInvalidKey) || !errors.As(err, &ke) || ke.Reason == "" {
			t.Errorf("key %q: err = %v, want a *KeyError", k, err)
		}
		if ran {
			t.Errorf("key %q: the handler ran", k)
		}
	}
	if st.Writes() != 0 {
		t.Fatalf("invalid keys caused %d store writes", st.Writes())
	}
}

// TestInvalidScopesAreRefusedBeforeAnything: a scope no store can keep
// whole (too long for MySQL's column, NUL for PostgreSQL's text, broken
// UTF-8) is refused by the engine with a *ScopeError, before the effect
// and before any store write; DoAsync and Resolve refuse it too.
func TestInvalidScopesAreRefusedBeforeAnything(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ctx := context.Background()
	for _, scope := range []string{strings.Repeat("s", 256), "nul\x00", "bad\xffutf8", "new\nline", "c1\u0085"} {
		ran := false
		h := func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil }
		_, err := e.DoBytes(ctx, idem.Request{Scope: scope, Key: "k"}, h)
		var se *idem.ScopeError
		if !errors.Is(err, idem.ErrInvalidScope) || !errors.As(err, &se) || se.Reason == "" {
			t.Errorf("scope %q: err = %v, want a *ScopeError", scope, err)
		}
		done := make(chan error, 1)
		e.DoAsync(ctx, idem.Request{Scope: scope, Key: "k"}, h, func(_ idem.Result, err error) { done <- err })
		if err := <-done; !errors.Is(err, idem.ErrInvalidScope) {
			t.Errorf("scope %q: DoAsync err = %v", scope, err)
		}
		if _, err := e.Resolve(ctx, scope, "k", idem.Resolution{Release: true, Reason: "test"}); !errors.Is(err, idem.ErrInvalidScope) {
			t.Errorf("scope %q: Resolve err = %v", scope, err)
		}
		if ran {
			t.Errorf("scope %q: the handler ran", scope)
		}
	}
	if st.Writes() != 0 {
		t.Fatalf("invalid scopes caused %d store writes", st.Writes())
	}
	for _, scope := range []string{"", strings.Repeat("s", 255), "tenant 42", "Zürich/ünïcode", "\uFFFD literal"} {
		if _, err := e.DoBytes(ctx, idem.Request{Scope: scope, Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, nil }); err != nil {
			t.Errorf("valid scope %q refused: %v", scope, err)
		}
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	st := memstore.New()
	_, err := idem.New(st, idem.Config{Lease: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "Config.Lease") {
		t.Fatalf("negative lease: %v", err)
	}
	_, err = idem.New(st, idem.Config{TTL: 24 * time.Hour, Cover: map[string]time.Duration{"client-retries": time.Hour, "dlq-replay": 7 * 24 * time.Hour}})
	var re *idem.RetentionError
	if !errors.As(err, &re) || re.Window != "dlq-replay" || !strings.Contains(err.Error(), "dlq-replay") {
		t.Fatalf("short TTL: %v, want a RetentionError naming dlq-replay", err)
	}
	if _, err := idem.New(nil, idem.Config{}); err == nil {
		t.Fatal("nil store accepted")
	}
}

func TestClosed(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	e.Close()
	if _, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, ok("v")); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed engine: %v", err)
	}
	e2 := newEngine(t, st, idem.Config{})
	st.Close()
	ran := false
	_, err := e2.DoBytes(context.Background(), idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		ran = true
		return nil, nil
	})
	if !errors.Is(err, idem.ErrClosed) || ran {
		t.Fatalf("closed store: %v (ran=%v)", err, ran)
	}
}

// failingStore fails every claim, as an unreachable database would.
type failingStore struct{ idem.Store }

func (failingStore) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	return idem.ClaimResult{}, errors.New("connection refused")
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	e := newEngine(t, failingStore{memstore.New()}, idem.Config{})
	ran := false
	_, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		ran = true
		return nil, nil
	})
	var se *idem.StoreError
	if !errors.Is(err, idem.ErrStoreUnavailable) || !errors.As(err, &se) || se.Op != "claim" {
		t.Fatalf("err = %v, want a *StoreError for claim", err)
	}
	if ran {
		t.Fatal("the effect ran without protection")
	}
}

func TestCancelledBeforeStartLeavesNothing(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.Get(context.Background(), "", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("a cancelled call left a record: %v", err)
	}
}

type recorder struct {
	mu  sync.Mutex
	out []idem.Outcome
}

func (r *recorder) Observe(_ context.Context, ev idem.Event) {
	if ev.Kind == idem.EventOutcome {
		r.mu.Lock()
		r.out = append(r.out, ev.Outcome)
		r.mu.Unlock()
	}
}

func (r *recorder) last() idem.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[len(r.out)-1]
}

func TestObserverSeesEveryOutcome(t *testing.T) {
	rec := &recorder{}
	st := memstore.New()
	e := newEngine(t, st, idem.Config{Observer: rec})
	ctx := context.Background()
	fpA, fpB := idem.NewFingerprint([]byte("a")), idem.NewFingerprint([]byte("b"))
	step := func(want idem.Outcome, r idem.Request, h idem.Handler) {
		t.Helper()
		_, _ = e.DoBytes(ctx, r, h)
		if got := rec.last(); got != want {
			t.Fatalf("outcome = %q, want %q", got, want)
		}
	}
	step(idem.OutcomeFirst, idem.Request{Key: "k", Fingerprint: fpA}, ok("v"))
	step(idem.OutcomeReplay, idem.Request{Key: "k", Fingerprint: fpA}, ok("v"))
	step(idem.OutcomeMismatch, idem.Request{Key: "k", Fingerprint: fpB}, ok("v"))
	step(idem.OutcomeFailed, idem.Request{Key: "f"}, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, errors.New("no") })
	step(idem.OutcomeReleased, idem.Request{Key: "r"}, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Release(nil) })
	step(idem.OutcomeUnknown, idem.Request{Key: "u"}, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(nil) })
	now := time.Now()
	if _, err := st.Claim(ctx, idem.ClaimParams{Key: "c", AttemptID: "other", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	step(idem.OutcomeConflict, idem.Request{Key: "c"}, ok("v"))
	step(idem.OutcomeError, idem.Request{Key: ""}, ok("v"))
	// Fenced: the record is resolved by an operator while the effect runs
	// (the fence grows).
	step(idem.OutcomeFenced, idem.Request{Key: "x"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		if _, err := st.Finish(ctx, idem.FinishParams{Key: "x", Fence: a.Fence, AttemptID: a.ID, State: idem.StateUnknown, CompletedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Resolve(ctx, "", "x", idem.Resolution{As: idem.StateFailed, Result: []byte("declined"), Actor: "test", Reason: "fence it"}); err != nil {
			t.Fatal(err)
		}
		return []byte("late"), nil
	})
}

// countingStore counts Get calls and hides the memory store's notifier, so
// waiters must poll.
type countingStore struct {
	inner  *memstore.Store
	gets   atomic.Int64
	claims atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	c.claims.Add(1)
	return c.inner.Claim(ctx, p)
}
func (c *countingStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	return c.inner.Finish(ctx, p)
}
func (c *countingStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	return c.inner.Release(ctx, p)
}
func (c *countingStore) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	return c.inner.Heartbeat(ctx, p)
}
func (c *countingStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	return c.inner.Resolve(ctx, p)
}
func (c *countingStore) SetMark(ctx context.Context, s, k string, f int64, m idem.Mark) error {
	return c.inner.SetMark(ctx, s, k, f, m)
}
func (c *countingStore) Get(ctx context.Context, s, k string) (*idem.Record, error) {
	c.gets.Add(1)
	return c.inner.Get(ctx, s, k)
}
func (c *countingStore) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	return c.inner.List(ctx, f)
}
func (c *countingStore) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	return c.inner.Sweep(ctx, p)
}
func (c *countingStore) Close() error { return c.inner.Close() }

// TestWaitersShareOneWatch: 1,000 waiters on one key held by another process
// cost the store a handful of reads in total, not a handful each.
func TestWaitersShareOneWatch(t *testing.T) {
	cs := &countingStore{inner: memstore.New()}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	held, err := cs.inner.Claim(ctx, idem.ClaimParams{Key: "hot", AttemptID: "elsewhere", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, cs, idem.Config{InFlight: idem.InFlightWait, Wait: 30 * time.Second, PollMax: 100 * time.Millisecond})
	const n = 1000
	var wg sync.WaitGroup
	var good atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.DoBytes(ctx, idem.Request{Key: "hot"}, ok("mine"))
			if err == nil && r.Replayed && string(r.Value) == "theirs" {
				good.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := cs.inner.Finish(ctx, idem.FinishParams{Key: "hot", Fence: held.Record.Fence, AttemptID: "elsewhere",
		State: idem.StateSucceeded, Result: []byte("theirs"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if good.Load() != n {
		t.Fatalf("%d of %d waiters got the replay", good.Load(), n)
	}
	// Polling from 5ms doubling to 100ms over ~0.5s is about 10 reads; a
	// watch per waiter would be ~10,000.
	if g := cs.gets.Load(); g > 50 {
		t.Fatalf("%d store reads for %d waiters: waiters are not sharing one watch", g, n)
	}
	// Woken waiters replay the record the watch read: one claim each (the
	// first try), not a second claim per waiter after the wake-up.
	if c := cs.claims.Load(); c > n+5 {
		t.Fatalf("%d claims for %d waiters: waiters claim again after the wake-up", c, n)
	}
	t.Logf("%d waiters, %d store reads, %d claims", n, cs.gets.Load(), cs.claims.Load())
}

// notifyingCountingStore is a countingStore whose memory store's
// notifications reach the engine.
type notifyingCountingStore struct{ *countingStore }

func (c notifyingCountingStore) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	return c.inner.Subscribe(ctx, scope, key)
}

// TestNotifiedWaitReadsGrowLogarithmically: with a store that notifies and
// the default PollMax, a waiter's fallback reads double their interval, so
// a 4 s wait costs a handful of reads, not one per PollMax (500 ms).
func TestNotifiedWaitReadsGrowLogarithmically(t *testing.T) {
	t.Parallel()
	cs := &countingStore{inner: memstore.New()}
	st := notifyingCountingStore{cs}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	held, err := cs.inner.Claim(ctx, idem.ClaimParams{Key: "slow", AttemptID: "elsewhere", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, st, idem.Config{InFlight: idem.InFlightWait, Wait: 30 * time.Second})
	done := make(chan error, 1)
	go func() {
		r, err := e.DoBytes(ctx, idem.Request{Key: "slow"}, ok("mine"))
		if err == nil && (!r.Replayed || string(r.Value) != "theirs") {
			err = fmt.Errorf("got %q replayed=%v, want the replay of theirs", r.Value, r.Replayed)
		}
		done <- err
	}()
	time.Sleep(4 * time.Second)
	if _, err := cs.inner.Finish(ctx, idem.FinishParams{Key: "slow", Fence: held.Record.Fence, AttemptID: "elsewhere",
		State: idem.StateSucceeded, Result: []byte("theirs"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// First read, fallbacks at 0.5, 1.5 and 3.5 s, the notified read: 5.
	// Polling every PollMax would be 9 or more.
	if g := cs.gets.Load(); g > 6 {
		t.Fatalf("%d store reads over a 4 s wait on a notifying store: the fallback does not back off", g)
	}
	t.Logf("%d store reads over a 4 s wait", cs.gets.Load())
}

// TestDuplicateOfLocallyHeldKeyNeedsNoClaim: while this engine runs a key's
// effect, a duplicate with the same fingerprint is in flight without a store
// claim — rejected at once or parked on the shared watch, then replayed —
// and a duplicate with another fingerprint still goes to the store and is
// refused as a mismatch.
func TestDuplicateOfLocallyHeldKeyNeedsNoClaim(t *testing.T) {
	cs := &countingStore{inner: memstore.New()}
	ctx := context.Background()
	e := newEngine(t, cs, idem.Config{InFlight: idem.InFlightWait, Wait: 30 * time.Second,
		ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}})
	req := idem.Request{Key: "held", Fingerprint: idem.Fingerprint{1}}
	started, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("v"), nil
		})
		holder <- err
	}()
	<-started
	if c := cs.claims.Load(); c != 1 {
		t.Fatalf("holder made %d claims, want 1", c)
	}

	reject := req
	reject.Policy.InFlight = idem.InFlightReject
	if _, err := e.DoBytes(ctx, reject, ok("dup")); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("rejected duplicate: %v, want ErrInFlight", err)
	}
	other := req
	other.Fingerprint = idem.Fingerprint{2}
	if _, err := e.DoBytes(ctx, other, ok("other")); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("duplicate with another fingerprint: %v, want ErrMismatch", err)
	}
	if c := cs.claims.Load(); c != 2 {
		t.Fatalf("%d claims after a rejected and a mismatched duplicate, want 2 (holder + mismatch)", c)
	}

	const n = 50
	var wg sync.WaitGroup
	var good atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.DoBytes(ctx, req, ok("dup"))
			if err == nil && r.Replayed && string(r.Value) == "v" {
				good.Add(1)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if good.Load() != n {
		t.Fatalf("%d of %d waiters replayed the holder's outcome", good.Load(), n)
	}
	if c := cs.claims.Load(); c != 2 {
		t.Fatalf("%d claims in all, want 2: waiters on a locally held key claimed", c)
	}
	// Once the outcome is recorded the key is no longer held: a later
	// duplicate asks the store and replays.
	r, err := e.DoBytes(ctx, reject, ok("late"))
	if err != nil || !r.Replayed || string(r.Value) != "v" {
		t.Fatalf("late duplicate: %+v, %v", r, err)
	}
}

// TestHeartbeatKeepsLongEffectAlive: an effect longer than its lease stays
// in_progress while it runs, so a duplicate sees it in flight, not unknown.
func TestHeartbeatKeepsLongEffectAlive(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{Lease: 300 * time.Millisecond})
	ctx := context.Background()
	started := make(chan struct{})
	finished := make(chan struct{})
	release := make(chan struct{})
	go func() {
		defer close(finished)
		_, _ = e.DoBytes(ctx, idem.Request{Key: "long"}, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("done"), nil
		})
	}()
	<-started
	for i := 0; i < 4; i++ {
		time.Sleep(250 * time.Millisecond) // a second in all: three leases
		if _, err := e.DoBytes(ctx, idem.Request{Key: "long"}, ok("dup")); !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("after %dms: %v, want ErrInFlight (the heartbeat should keep the lease)", (i+1)*250, err)
		}
	}
	close(release)
	<-finished
	r, err := e.DoBytes(ctx, idem.Request{Key: "long"}, ok("dup"))
	if err != nil || string(r.Value) != "done" {
		t.Fatalf("after the effect = %+v, %v", r, err)
	}
}

func TestResolveRefusesDecidedRecordsWithoutForce(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ctx := context.Background()
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{Release: true}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("resolve of succeeded without force = %v", err)
	}
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("refunded"), Force: true, Actor: "ops", Reason: "chargeback"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); !errors.Is(err, idem.ErrRecordedFailure) {
		t.Fatalf("after forced resolve: %v", err)
	}
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateInProgress}); err == nil {
		t.Fatal("resolve to in_progress accepted")
	}
}

// txOnly fails the test when the store is used from a goroutine other than
// the one that created it, as a database transaction would misbehave.
type txOnly struct {
	*memstore.Store
	t       *testing.T
	owner   int64
	touched atomic.Int64
}

func (s *txOnly) check() {
	if id := goid(); id != s.owner {
		s.t.Errorf("transaction-bound store used from goroutine %d, owner %d", id, s.owner)
	}
	s.touched.Add(1)
}

func (s *txOnly) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	s.check()
	return s.Store.Heartbeat(ctx, p)
}

func (s *txOnly) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	s.check()
	return s.Store.Finish(ctx, p)
}

func goid() int64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	var id int64
	fmt.Sscanf(strings.TrimPrefix(string(buf[:n]), "goroutine "), "%d", &id)
	return id
}

func TestWithStoreRunsNoBackgroundHeartbeat(t *testing.T) {
	base := newEngine(t, memstore.New(), idem.Config{Lease: 30 * time.Millisecond})
	tx := &txOnly{Store: memstore.New(), t: t, owner: goid()}
	e := base.WithStore(tx)
	_, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		time.Sleep(100 * time.Millisecond) // three leases: a heartbeat goroutine would fire
		return []byte("v"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tx.touched.Load() == 0 {
		t.Fatal("the store was never used")
	}
}

// TestHeartbeatFencedCancelsTheEffect: when a heartbeat finds the claim
// taken over (here by a forced resolution), the effect's context is
// cancelled with ErrFenced as its cause, and the outcome is unknown.
func TestHeartbeatFencedCancelsTheEffect(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{Lease: 90 * time.Millisecond})
	ctx := context.Background()
	started := make(chan struct{})
	var cause, beat error
	done := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			close(started)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			cause, beat = context.Cause(ctx), a.Heartbeat(context.Background())
			return nil, ctx.Err()
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
	if !errors.Is(beat, idem.ErrFenced) {
		t.Fatalf("Attempt.Heartbeat = %v, want ErrFenced", beat)
	}
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("DoBytes = %v, want an unknown outcome", err)
	}
}
