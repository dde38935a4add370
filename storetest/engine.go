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

// ex bundles an engine test's store, clock and effect counter.
type ex struct {
	t     *testing.T
	s     idem.Store
	ctx   context.Context
	clock *Clock
	runs  atomic.Int64
}

func newEx(t *testing.T, h Harness) *ex {
	return &ex{t: t, s: h.open(t), ctx: ctxT(t), clock: NewClock()}
}

func (x *ex) engine(st idem.Store, cfg idem.Config) *idem.Engine {
	x.t.Helper()
	if st == nil {
		st = x.s
	}
	if cfg.Clock == nil {
		// The suite drives time itself: no offset to the store's clock.
		cfg.Clock, cfg.ClockSync = x.clock.Now, -1
	}
	// The suite checks store semantics; test servers may run without
	// persistence (durability has its own tests in each store).
	cfg.AllowVolatileStore = true
	if cfg.Lease == 0 {
		cfg.Lease = time.Minute
	}
	e, err := idem.New(st, cfg)
	if err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() { e.Close() })
	return e
}

func req(key, body string) idem.Request {
	return idem.Request{Scope: "s", Key: idem.Key(key), Fingerprint: fp(body), Operation: "test"}
}

// effect counts a run and returns v.
func (x *ex) effect(v string) idem.Handler {
	return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		return []byte(v), nil
	}
}

func (x *ex) wantRuns(n int64) {
	x.t.Helper()
	if got := x.runs.Load(); got != n {
		x.t.Fatalf("the effect ran %d times, want %d", got, n)
	}
}

func runEngine(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, x *ex)
	}{
		{"Replay", engineReplay},
		{"FailureReplayed", engineFailureReplayed},
		{"Divergence", engineDivergence},
		{"ConcurrentSameKeyReject", engineConcurrentReject},
		{"ConcurrentSameKeyWait", engineConcurrentWait},
		{"Storm", engineStorm},
		{"CrashAfterClaim", engineCrashAfterClaim},
		{"CrashAfterEffect", engineCrashAfterEffect},
		{"StaleFenceAfterTakeover", engineStaleFence},
		{"ReleaseFreesKey", engineRelease},
		{"WaitersAfterRelease", engineWaitersAfterRelease},
		{"Retention", engineRetention},
		{"ScopeIsolation", engineScope},
		{"LostAnswers", engineLostAnswers},
		{"PanicIsUnknown", enginePanic},
		{"CallerCancelNeitherReleasesNorInterrupts", engineCancel},
		{"RedriveOnlyWhenDeclared", engineRedrive},
		{"TypedDo", engineTypedDo},
		{"RacingDecidersOneWins", engineRacingDeciders},
		{"EncryptionAtRest", engineEncryption},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			Deadline(t, h.deadline())
			tc.fn(t, newEx(t, h))
		})
	}
}

func engineReplay(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	r1, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v1"))
	if err != nil || r1.Replayed || string(r1.Value) != "v1" {
		t.Fatalf("first = %+v, %v", r1, err)
	}
	for i := 0; i < 3; i++ {
		r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("other"))
		if err != nil || !r.Replayed || string(r.Value) != "v1" {
			t.Fatalf("duplicate %d = %+v, %v; want replay of v1", i, r, err)
		}
	}
	x.wantRuns(1)
}

func engineFailureReplayed(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	boom := errors.New("card declined")
	_, err := e.DoBytes(x.ctx, req("k", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		return nil, boom
	})
	var fe *idem.FailureError
	if !errors.As(err, &fe) || fe.Replayed || !errors.Is(err, boom) || !errors.Is(err, idem.ErrRecordedFailure) {
		t.Fatalf("first failure = %v", err)
	}
	r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("x"))
	if !errors.As(err, &fe) || !fe.Replayed || fe.Message != "card declined" || r.State != idem.StateFailed {
		t.Fatalf("duplicate of a failure = %+v, %v; want the replayed failure", r, err)
	}
	x.wantRuns(1)
}

func engineDivergence(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	if _, err := e.DoBytes(x.ctx, req("k", "amount=50"), x.effect("ok")); err != nil {
		t.Fatal(err)
	}
	r, err := e.DoBytes(x.ctx, req("k", "amount=5000"), x.effect("other"))
	if !errors.Is(err, idem.ErrMismatch) || r.Value != nil {
		t.Fatalf("same key, other body = %+v, %v; want ErrMismatch and no value", r, err)
	}
	// In flight too: mismatch at once, not a conflict.
	hold := make(chan struct{})
	started := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(x.ctx, req("k2", "a"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			x.runs.Add(1)
			close(started)
			<-hold
			return []byte("a"), nil
		})
		returned <- err
	}()
	awaitStart(t, started, returned)
	_, err = e.DoBytes(x.ctx, req("k2", "b"), x.effect("b"))
	close(hold)
	if !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("in-flight duplicate with another body = %v, want ErrMismatch", err)
	}
	x.wantRuns(2)
}

func engineConcurrentReject(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{InFlight: idem.InFlightReject})
	const n = 64
	var wg sync.WaitGroup
	var ok, conflicts, other atomic.Int64
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.DoBytes(x.ctx, req("hot", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				x.runs.Add(1)
				time.Sleep(20 * time.Millisecond)
				return []byte("v"), nil
			})
			var ife *idem.InFlightError
			switch {
			case err == nil && string(r.Value) == "v":
				ok.Add(1)
			case errors.As(err, &ife) && ife.RetryAfter > 0:
				conflicts.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected: %+v, %v", r, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	x.wantRuns(1)
	if ok.Load()+conflicts.Load() != n || ok.Load() < 1 {
		t.Fatalf("ok=%d conflicts=%d other=%d", ok.Load(), conflicts.Load(), other.Load())
	}
}

func engineConcurrentWait(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{InFlight: idem.InFlightWait, Wait: 20 * time.Second})
	const n = 64
	var wg sync.WaitGroup
	var replays atomic.Int64
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.DoBytes(x.ctx, req("hot", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				x.runs.Add(1)
				time.Sleep(50 * time.Millisecond)
				return []byte("v"), nil
			})
			if err != nil || string(r.Value) != "v" {
				t.Errorf("waiter got %+v, %v; want the recorded value", r, err)
			}
			if r.Replayed {
				replays.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	x.wantRuns(1)
	if replays.Load() != n-1 {
		t.Fatalf("%d replays, want %d", replays.Load(), n-1)
	}
}

func engineStorm(t *testing.T, x *ex) {
	rep := Race(t, x.s, 32, 100)
	if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
		t.Fatalf("storm over 100 keys: %d duplicate effects, %d keys never run, %d errors (first: %v)",
			rep.Extra, rep.Missing, rep.Errors, rep.FirstErr)
	}
}

// A process claims and dies before the effect: no effect ever runs for that
// intent, and after the lease the record reads as unknown, not as free.
func engineCrashAfterClaim(t *testing.T, x *ex) {
	now := x.clock.Now()
	if _, err := x.s.Claim(x.ctx, idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: fp("b"), AttemptID: "dead",
		Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e := x.engine(nil, idem.Config{})
	if _, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v")); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("during the lease = %v, want ErrInFlight", err)
	}
	x.clock.Advance(2 * time.Minute)
	_, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v"))
	var ue *idem.UnknownOutcomeError
	if !errors.As(err, &ue) {
		t.Fatalf("after the lease = %v, want ErrUnknownOutcome", err)
	}
	rec, err := x.s.Get(x.ctx, "s", "k")
	if err != nil || rec.State != idem.StateUnknown || rec.Fence != 1 {
		t.Fatalf("record = %+v, %v; want unknown with the same fence", rec, err)
	}
	x.wantRuns(0)
}

// A process runs the effect and dies before recording it: the duplicate
// never runs the effect again.
func engineCrashAfterEffect(t *testing.T, x *ex) {
	cs := &CrashStore{Store: x.s}
	dying := x.engine(cs, idem.Config{StoreRetries: 1})
	_, err := dying.DoBytes(x.ctx, req("k", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		cs.Crash()
		return []byte("charged"), nil
	})
	if err == nil {
		t.Fatal("the crashed attempt reported success")
	}
	e := x.engine(nil, idem.Config{})
	if _, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("again")); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("duplicate during the lease = %v, want ErrInFlight", err)
	}
	x.clock.Advance(2 * time.Minute)
	if _, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("again")); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("duplicate after the lease = %v, want ErrUnknownOutcome", err)
	}
	x.wantRuns(1)
	rec, _ := x.s.Get(x.ctx, "s", "k")
	if rec == nil || rec.State != idem.StateUnknown {
		t.Fatalf("record = %+v, want unknown (evidence)", rec)
	}
}

// A paused holder wakes after its record was taken over (re-driven under a
// new fence): its outcome write is refused and changes nothing.
func engineStaleFence(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	pol := idem.Policy{Redrivable: true}
	paused := make(chan struct{})
	wake := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		r := req("k", "b")
		r.Policy = pol
		_, err := e.DoBytes(x.ctx, r, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			x.runs.Add(1)
			close(paused)
			<-wake
			return []byte("from-paused"), nil
		})
		done <- err
	}()
	<-paused
	x.clock.Advance(2 * time.Minute) // the paused holder's lease passes
	r := req("k", "b")
	r.Policy = pol
	res, err := e.DoBytes(x.ctx, r, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		if !a.Redrive || a.Fence != 2 || a.ForwardKey() != "k" {
			t.Errorf("re-drive attempt = %+v, want fence 2, same key", a)
		}
		return []byte("from-redrive"), nil
	})
	if err != nil || string(res.Value) != "from-redrive" {
		t.Fatalf("re-drive = %+v, %v", res, err)
	}
	close(wake)
	if err := <-done; !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("paused holder's outcome = %v, want ErrFenced", err)
	}
	rec, _ := x.s.Get(x.ctx, "s", "k")
	if rec == nil || string(rec.Result) != "from-redrive" || rec.Fence != 2 {
		t.Fatalf("record = %+v; the stale holder must not have written", rec)
	}
}

func engineRelease(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	invalid := errors.New("validation failed")
	_, err := e.DoBytes(x.ctx, req("k", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		return nil, idem.Release(invalid)
	})
	if !errors.Is(err, invalid) || !errors.Is(err, idem.ErrReleased) {
		t.Fatalf("released = %v", err)
	}
	if _, err := x.s.Get(x.ctx, "s", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("released record still there: %v", err)
	}
	r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v"))
	if err != nil || r.Replayed {
		t.Fatalf("next claim after release = %+v, %v; want a first run", r, err)
	}
	x.wantRuns(1)
}

func engineWaitersAfterRelease(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{InFlight: idem.InFlightWait, Wait: 20 * time.Second})
	started := make(chan struct{})
	release := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(x.ctx, req("k", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return nil, idem.Release(nil)
		})
		returned <- err
	}()
	awaitStart(t, started, returned)
	const n = 8
	var wg sync.WaitGroup
	var firsts atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v"))
			if err != nil || string(r.Value) != "v" {
				t.Errorf("waiter = %+v, %v", r, err)
			}
			if !r.Replayed {
				firsts.Add(1)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the waiters queue up
	close(release)
	wg.Wait()
	x.wantRuns(1)
	if firsts.Load() != 1 {
		t.Fatalf("%d waiters ran the effect, want exactly 1", firsts.Load())
	}
}

func engineRetention(t *testing.T, x *ex) {
	//idem:ignore retention the conformance check that idem.New refuses this TTL
	if _, err := idem.New(x.s, idem.Config{TTL: time.Hour, Cover: map[string]time.Duration{"dlq-replay": 7 * 24 * time.Hour}}); !errors.Is(err, idem.ErrRetentionTooShort) {
		t.Fatalf("TTL shorter than a window = %v, want ErrRetentionTooShort", err)
	}
	e := x.engine(nil, idem.Config{TTL: time.Hour})
	if _, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v")); err != nil {
		t.Fatal(err)
	}
	x.clock.Advance(59 * time.Minute)
	if r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v")); err != nil || !r.Replayed {
		t.Fatalf("inside the TTL = %+v, %v; want a replay", r, err)
	}
	x.clock.Advance(time.Minute)
	if r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v2")); err != nil || r.Replayed || string(r.Value) != "v2" {
		t.Fatalf("after the TTL = %+v, %v; want a new intent", r, err)
	}
	x.wantRuns(2)
	// Unknown is never swept; expired terminal is.
	now := x.clock.Now()
	if _, err := x.s.Claim(x.ctx, idem.ClaimParams{Scope: "s", Key: "u", Fingerprint: fp("b"), AttemptID: "dead", Now: now, LeaseUntil: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DoBytes(x.ctx, req("u", "b"), x.effect("v")); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("expired lease = %v", err)
	}
	x.clock.Advance(10 * time.Hour)
	sw := idem.NewSweeper(x.s, idem.SweeperConfig{BatchSize: 1, Clock: x.clock.Now})
	n, err := sw.RunOnce(x.ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want the one expired record", n, err)
	}
	if rec, err := x.s.Get(x.ctx, "s", "u"); err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("unknown record after sweep = %+v, %v", rec, err)
	}
}

func engineScope(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	a := req("k", "b")
	a.Scope = "alice"
	b := req("k", "b")
	b.Scope = "bob"
	if r, err := e.DoBytes(x.ctx, a, x.effect("alice-secret")); err != nil || r.Replayed {
		t.Fatal(r, err)
	}
	r, err := e.DoBytes(x.ctx, b, x.effect("bob-value"))
	if err != nil || r.Replayed || string(r.Value) != "bob-value" {
		t.Fatalf("bob with alice's key = %+v, %v; want his own first run", r, err)
	}
	x.wantRuns(2)
}

func engineLostAnswers(t *testing.T, x *ex) {
	lossy := NewLossyStore(x.s, map[string]int{"claim": 1, "finish": 1})
	e := x.engine(lossy, idem.Config{})
	r, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v"))
	if err != nil || r.Replayed || string(r.Value) != "v" {
		t.Fatalf("with lost claim and finish answers = %+v, %v", r, err)
	}
	rec, err := x.s.Get(x.ctx, "s", "k")
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "v" {
		t.Fatalf("record = %+v, %v", rec, err)
	}
	lossyRel := NewLossyStore(x.s, map[string]int{"release": 1})
	e2 := x.engine(lossyRel, idem.Config{})
	if _, err := e2.DoBytes(x.ctx, req("k2", "b"), func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, idem.Release(nil)
	}); !errors.Is(err, idem.ErrReleased) {
		t.Fatalf("release with lost answer = %v", err)
	}
	if _, err := x.s.Get(x.ctx, "s", "k2"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatal("record not released")
	}
	x.wantRuns(1)
}

func enginePanic(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the handler's panic re-raised", p)
			}
		}()
		_, _ = e.DoBytes(x.ctx, req("k", "b"), func(context.Context, *idem.Attempt) ([]byte, error) {
			x.runs.Add(1)
			panic("boom")
		})
	}()
	if _, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("v")); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("after a panic = %v, want ErrUnknownOutcome", err)
	}
	x.wantRuns(1)
}

func engineCancel(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	ctx, cancel := context.WithCancel(x.ctx)
	// The caller goes away mid-effect: the effect's context does not end
	// with it, and the outcome is recorded.
	_, err := e.DoBytes(ctx, req("k", "b"), func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		cancel()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
			return []byte("v"), nil
		}
	})
	if err != nil {
		t.Fatalf("caller cancelled mid-effect = %v, want the effect's outcome", err)
	}
	rec, err := x.s.Get(x.ctx, "s", "k")
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "v" {
		t.Fatalf("record = %+v, %v; a caller that leaves must neither release nor interrupt a started effect", rec, err)
	}
	// The effect's own timeout is what ends it, and then the outcome is
	// unknown (never a release).
	_, err = e.DoBytes(x.ctx, idem.Request{Scope: "s", Key: "t", Fingerprint: fp("b"), Policy: idem.Policy{Timeout: 10 * time.Millisecond}},
		func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("timed-out effect = %v, want ErrUnknownOutcome", err)
	}
	x.wantRuns(1)
}

func engineRedrive(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	mkUnknown := func(key string) {
		_, err := e.DoBytes(x.ctx, req(key, "b"), func(context.Context, *idem.Attempt) ([]byte, error) {
			x.runs.Add(1)
			return nil, idem.Unknown(errors.New("provider timed out"))
		})
		if !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Fatalf("Unknown(err) = %v", err)
		}
	}
	mkUnknown("plain")
	if _, err := e.DoBytes(x.ctx, req("plain", "b"), x.effect("v")); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("not re-drivable = %v, want ErrUnknownOutcome", err)
	}
	x.wantRuns(1)
	mkUnknown("redrive")
	r := req("redrive", "b")
	r.Policy.Redrivable = true
	res, err := e.DoBytes(x.ctx, r, x.effect("v"))
	if err != nil || string(res.Value) != "v" || res.Record.Fence != 2 {
		t.Fatalf("re-drive = %+v, %v", res, err)
	}
	x.wantRuns(3)
}

func engineTypedDo(t *testing.T, x *ex) {
	type charge struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	e := x.engine(nil, idem.Config{})
	for i := 0; i < 2; i++ {
		c, res, err := idem.Do(x.ctx, e, req("typed", "b"), func(ctx context.Context, a *idem.Attempt) (charge, error) {
			x.runs.Add(1)
			return charge{ID: fmt.Sprint("ch_", a.Fence), Amount: 500}, nil
		})
		if err != nil || c.ID != "ch_1" || c.Amount != 500 || res.Replayed != (i == 1) {
			t.Fatalf("Do #%d = %+v, %+v, %v", i, c, res, err)
		}
	}
	x.wantRuns(1)
}

// awaitStart waits until a background call's effect has started, and fails
// the test at once if the call returns first (its claim failed), instead of
// waiting for an effect that will never start until the package times out.
func awaitStart(t *testing.T, started <-chan struct{}, returned <-chan error) {
	t.Helper()
	select {
	case <-started:
	case err := <-returned:
		t.Fatalf("the first call returned before its effect started: %v", err)
	}
}

// engineRacingDeciders: two deciders (an operator and a reconciler) saw the
// same record at the same fence and resolve it at once, each with
// Resolution.IfFence; exactly one decision is applied and the other is
// refused with ErrFenced, whatever the interleaving. Force is set, as an
// operator correcting a decided record does, so that only the fence
// precondition stands between the two.
func engineRacingDeciders(t *testing.T, x *ex) {
	e := x.engine(nil, idem.Config{})
	for round := range 20 {
		key := fmt.Sprint("decide-", round)
		res, err := e.DoBytes(x.ctx, req(key, "b"), func(context.Context, *idem.Attempt) ([]byte, error) {
			return nil, idem.Unknown(errors.New("provider timed out"))
		})
		if !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Fatalf("unknown record: %+v, %v", res, err)
		}
		seen, err := x.s.Get(x.ctx, "s", key)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			won     atomic.Int64
			results [2]string
			errs    [2]error
		)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = fmt.Sprint("decider-", i)
				_, errs[i] = e.Resolve(x.ctx, "s", idem.Key(key), idem.Resolution{As: idem.StateSucceeded, Force: true,
					IfFence: seen.Fence, Result: []byte(results[i]), Actor: results[i], Reason: "race"})
				if errs[i] == nil {
					won.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: %d deciders won (errors %v, %v); want exactly one", round, won.Load(), errs[0], errs[1])
		}
		loser := 0
		if errs[0] == nil {
			loser = 1
		}
		if !errors.Is(errs[loser], idem.ErrFenced) {
			t.Fatalf("round %d: the losing decider got %v, want ErrFenced", round, errs[loser])
		}
		got, err := x.s.Get(x.ctx, "s", key)
		if err != nil || string(got.Result) != results[1-loser] || got.Fence != seen.Fence+1 {
			t.Fatalf("round %d: record after the race = %+v, %v; want the winner's result at fence %d", round, got, err, seen.Fence+1)
		}
	}
}
