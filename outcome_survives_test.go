package idem_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Tests for "once an effect has started, its outcome belongs to the
// intent": the caller's cancellation never reaches the effect, outcome
// writes are retried for the whole FinishTimeout, and what the store still
// cannot take is spooled and re-applied, fenced.

// downStore is a memory store whose outcome writes (Finish, Release) fail
// while down is set, as a store that went away after the claim would.
type downStore struct {
	*memstore.Store
	down     atomic.Bool
	failures atomic.Int64 // outcome writes refused so far
	failN    atomic.Int64 // when > 0, refuse only this many outcome writes
}

var errStoreDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (s *downStore) refuse() bool {
	if n := s.failN.Load(); n > 0 {
		return s.failures.Add(1) <= n
	}
	if s.down.Load() {
		s.failures.Add(1)
		return true
	}
	return false
}

func (s *downStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if s.refuse() {
		return nil, errStoreDown
	}
	return s.Store.Finish(ctx, p)
}

func (s *downStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	if s.refuse() {
		return errStoreDown
	}
	return s.Store.Release(ctx, p)
}

type ctxKey struct{}

// TestEffectIsDetachedFromTheCaller: the caller's context ends while the
// effect runs; the effect's context does not end with it (it keeps the
// caller's values), the effect completes and its outcome is recorded.
func TestEffectIsDetachedFromTheCaller(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "trace-7"))
	r, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
		cancel() // the client gives up mid-effect
		select {
		case <-ctx.Done():
			return nil, ctx.Err() // what a provider SDK does when its context ends
		case <-time.After(50 * time.Millisecond):
		}
		if v, _ := ctx.Value(ctxKey{}).(string); v != "trace-7" {
			return nil, errors.New("the caller's values are lost")
		}
		return []byte("charged"), nil
	})
	if err != nil || r.State != idem.StateSucceeded || string(r.Value) != "charged" {
		t.Fatalf("DoBytes = %+v, %v; want succeeded: a caller that leaves must not interrupt the effect", r, err)
	}
	rec, err := st.Get(context.Background(), "", "k")
	if err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("record = %+v, %v; want succeeded", rec, err)
	}
}

// TestEffectTimeoutEndsTheEffect: the effect's own timeout (not the
// caller) ends an effect that does not return; its context reports the
// deadline and DeadlineExceeded, and the outcome is unknown.
func TestEffectTimeoutEndsTheEffect(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  idem.Config
		pol  idem.Policy
	}{
		{"Config.EffectTimeout", idem.Config{EffectTimeout: 100 * time.Millisecond}, idem.Policy{}},
		{"Policy.Timeout", idem.Config{}, idem.Policy{Timeout: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			e := newEngine(t, st, tc.cfg)
			var (
				hadDeadline bool
				ctxErr      error
			)
			start := time.Now()
			_, err := e.DoBytes(context.Background(), idem.Request{Key: "k", Policy: tc.pol}, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
				_, hadDeadline = ctx.Deadline()
				select {
				case <-ctx.Done():
					ctxErr = ctx.Err()
					return nil, ctxErr
				case <-time.After(10 * time.Second):
					return []byte("never"), nil
				}
			})
			if !errors.Is(err, idem.ErrUnknownOutcome) {
				t.Fatalf("DoBytes = %v after %s; want ErrUnknownOutcome at the effect timeout", err, time.Since(start))
			}
			if !hadDeadline || !errors.Is(ctxErr, context.DeadlineExceeded) {
				t.Fatalf("effect context: deadline %v, err %v; want a deadline and DeadlineExceeded", hadDeadline, ctxErr)
			}
			if rec, _ := st.Get(context.Background(), "", "k"); rec == nil || rec.State != idem.StateUnknown {
				t.Fatalf("record = %+v; want unknown", rec)
			}
		})
	}
}

// TestOutcomeWriteRetriedUntilFinishTimeout: a store that refuses six
// outcome writes in a row (a blip of some 300 ms with the backoff) still
// gets the outcome: the write is retried for the whole FinishTimeout, not
// StoreRetries times.
func TestOutcomeWriteRetriedUntilFinishTimeout(t *testing.T) {
	st := &downStore{Store: memstore.New()}
	st.failN.Store(6)
	e := newEngine(t, st, idem.Config{FinishTimeout: 10 * time.Second})
	r, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, ok("v"))
	if err != nil || r.State != idem.StateSucceeded {
		t.Fatalf("DoBytes = %+v, %v; want succeeded after the store came back", r, err)
	}
	if rec, _ := st.Get(context.Background(), "", "k"); rec == nil || rec.State != idem.StateSucceeded {
		t.Fatalf("record = %+v; want succeeded", rec)
	}
	if n := st.failures.Load(); n < 7 {
		t.Fatalf("%d refused writes; the test needs the seventh to be reached", n)
	}
}

// TestOutcomeWriteGivesUpAtFinishTimeout: without a spool, a store that
// stays down past FinishTimeout leaves the record in progress (unknown
// after its lease) and DoBytes reports the store failure.
func TestOutcomeWriteGivesUpAtFinishTimeout(t *testing.T) {
	st := &downStore{Store: memstore.New()}
	st.down.Store(true)
	e := newEngine(t, st, idem.Config{FinishTimeout: 200 * time.Millisecond})
	_, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, ok("v"))
	if !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes = %v; want ErrStoreUnavailable", err)
	}
	if st.failures.Load() < 3 {
		t.Fatalf("only %d attempts in FinishTimeout; want the write retried", st.failures.Load())
	}
	if rec, _ := st.Get(context.Background(), "", "k"); rec == nil || rec.State != idem.StateInProgress {
		t.Fatalf("record = %+v; want in_progress", rec)
	}
}

func openSpool(t *testing.T, dir string) *idem.Spool {
	t.Helper()
	sp, err := idem.OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// spoolConfig is an engine configuration whose outcome writes give up
// quickly and whose spool is applied only when the test says so.
func spoolConfig(sp *idem.Spool) idem.Config {
	return idem.Config{FinishTimeout: 100 * time.Millisecond, Spool: sp, SpoolInterval: time.Hour}
}

// TestSpoolKeepsAnOutcomeTheStoreCouldNotTake: the store is down past
// FinishTimeout; the outcome goes to the spool (a 0600 file), the caller
// gets its result, a duplicate is answered from the spool without running
// the effect, and once the store is back the outcome is applied and leaves
// the spool.
func TestSpoolKeepsAnOutcomeTheStoreCouldNotTake(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sp := openSpool(t, dir)
	st := &downStore{Store: memstore.New()}
	e := newEngine(t, st, spoolConfig(sp))
	st.down.Store(true)
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 5000"))}
	r, err := e.DoBytes(ctx, req, ok("ch_1"))
	if err != nil || r.State != idem.StateSucceeded || string(r.Value) != "ch_1" {
		t.Fatalf("DoBytes = %+v, %v; want the outcome, spooled", r, err)
	}
	if sp.Len() != 1 {
		t.Fatalf("spool holds %d outcomes, want 1", sp.Len())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.outcome.json"))
	if len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("spool file mode %v, %v; want 0600 (it holds a recorded response)", fi.Mode(), err)
	}

	ran := false
	r, err = e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if err != nil || !r.Replayed || string(r.Value) != "ch_1" || ran {
		t.Fatalf("duplicate while spooled = %+v, %v (ran %v); want a replay of ch_1 from the spool", r, err, ran)
	}
	other := req
	other.Fingerprint = idem.NewFingerprint([]byte("charge 5001"))
	if _, err := e.DoBytes(ctx, other, ok("x")); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("other request with the key while spooled = %v; want ErrMismatch", err)
	}

	if n, err := e.ApplySpool(ctx); n != 0 || err == nil {
		t.Fatalf("ApplySpool with the store down = %d, %v; want 0 and the store's error", n, err)
	}
	st.down.Store(false)
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v; want 1 applied", n, err)
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "ch_1" {
		t.Fatalf("record = %+v, %v; want succeeded ch_1", rec, err)
	}
	if sp.Len() != 0 {
		t.Fatalf("spool still holds %d", sp.Len())
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.outcome.json")); len(files) != 0 {
		t.Fatalf("spool files left: %v", files)
	}
}

// TestSpoolIsReappliedAfterARestart: a process that spooled outcomes and
// stopped leaves them in the directory; the next engine opening it applies
// them by itself once the store answers.
func TestSpoolIsReappliedAfterARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := &downStore{Store: memstore.New()}
	st.down.Store(true)
	e1, err := idem.New(st, spoolConfig(openSpool(t, dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []idem.Key{"a", "b", "c"} {
		if _, err := e1.DoBytes(ctx, idem.Request{Key: k}, ok("v-"+string(k))); err != nil {
			t.Fatal(err)
		}
	}
	// A released attempt is spooled too: its claim must not turn unknown.
	if _, err := e1.DoBytes(ctx, idem.Request{Key: "r"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, idem.Release(errors.New("declined before charging"))
	}); !errors.Is(err, idem.ErrReleased) {
		t.Fatalf("released attempt = %v", err)
	}
	e1.Close() // the process stops (a SIGKILL leaves the same files: each was fsync'd before the answer)
	st.down.Store(false)

	sp := openSpool(t, dir)
	if sp.Len() != 4 {
		t.Fatalf("reopened spool holds %d outcomes, want 4", sp.Len())
	}
	cfg := spoolConfig(sp)
	cfg.SpoolInterval = 10 * time.Millisecond
	newEngine(t, st, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for sp.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if sp.Len() != 0 {
		t.Fatalf("%d outcomes still spooled after 10s", sp.Len())
	}
	for _, k := range []string{"a", "b", "c"} {
		rec, err := st.Get(ctx, "", k)
		if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "v-"+k {
			t.Fatalf("record %s = %+v, %v; want succeeded", k, rec, err)
		}
	}
	if rec, err := st.Get(ctx, "", "r"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("released key = %+v, %v; want no record (released)", rec, err)
	}
}

// TestSpoolNeverOverwritesARecordThatMovedOn: while an outcome waits in
// the spool, an operator resolves the record (the fence moves on); the
// spooled outcome is then dropped, not applied over the decision.
func TestSpoolNeverOverwritesARecordThatMovedOn(t *testing.T) {
	ctx := context.Background()
	sp := openSpool(t, t.TempDir())
	st := &downStore{Store: memstore.New()}
	e := newEngine(t, st, spoolConfig(sp))
	st.down.Store(true)
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("late truth")); err != nil {
		t.Fatal(err)
	}
	st.down.Store(false)
	if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("operator: refunded"), Force: true, Actor: "ops", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v; want the outcome to leave the spool", n, err)
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.State != idem.StateFailed || string(rec.Result) != "operator: refunded" {
		t.Fatalf("record = %+v, %v; want the operator's decision kept", rec, err)
	}
}

// TestSpooledOutcomeAppliesOverALateUnknown: the holder's lease ran out
// while its outcome waited in the spool and another reader marked the
// record unknown (the fence does not change): the spooled outcome is the
// truth arriving late and is applied.
func TestSpooledOutcomeAppliesOverALateUnknown(t *testing.T) {
	ctx := context.Background()
	sp := openSpool(t, t.TempDir())
	st := &downStore{Store: memstore.New()}
	cfg := spoolConfig(sp)
	cfg.Lease = 60 * time.Millisecond
	e := newEngine(t, st, cfg)
	st.down.Store(true)
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); err != nil {
		t.Fatal(err)
	}
	st.down.Store(false)
	time.Sleep(100 * time.Millisecond) // past the lease
	other := newEngine(t, st, idem.Config{})
	if _, err := other.DoBytes(ctx, idem.Request{Key: "k"}, ok("again")); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("another engine's duplicate = %v; want ErrUnknownOutcome (it holds no spool)", err)
	}
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v", n, err)
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result) != "v" {
		t.Fatalf("record = %+v, %v; want succeeded v", rec, err)
	}
}

// cancelledClaimStore fails Claim the way a network driver does when the
// caller's context ends mid-call: with its own error, not the context's.
type cancelledClaimStore struct {
	*memstore.Store
	cancel context.CancelFunc
}

func (s *cancelledClaimStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	s.cancel()
	return idem.ClaimResult{}, errors.New("read tcp 127.0.0.1:5432: use of closed network connection")
}

// TestCallerGoneBeforeTheClaimIsNotAStoreError: a caller that went away
// while the claim ran gets its context's error and the cancelled outcome;
// the store operation is reported with the context's error, so nothing
// counts it as a store failure.
func TestCallerGoneBeforeTheClaimIsNotAStoreError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var outcome idem.Outcome
	var storeErrs []error
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		switch ev.Kind {
		case idem.EventOutcome:
			outcome = ev.Outcome
		case idem.EventStore:
			storeErrs = append(storeErrs, ev.Err)
		}
	})
	e := newEngine(t, &cancelledClaimStore{Store: memstore.New(), cancel: cancel}, idem.Config{Observer: obs})
	_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes = %v; want context.Canceled, not a store failure", err)
	}
	if outcome != idem.OutcomeCancelled {
		t.Fatalf("outcome %q, want %q", outcome, idem.OutcomeCancelled)
	}
	if len(storeErrs) == 0 || !errors.Is(storeErrs[0], context.Canceled) {
		t.Fatalf("store events %v; want the claim reported with context.Canceled", storeErrs)
	}
}

// lostClaimStore commits every claim and loses its answer, the way a
// connection cut by a store outage does, and then fails the next getDown
// reads and claims (the store is still away when the engine looks).
type lostClaimStore struct {
	*memstore.Store
	getDown atomic.Int64
	lost    atomic.Bool
}

func (s *lostClaimStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if s.lost.CompareAndSwap(false, true) {
		_, _ = s.Store.Claim(ctx, p)
		return idem.ClaimResult{}, errStoreDown // committed, answer lost
	}
	if s.getDown.Load() > 0 {
		return idem.ClaimResult{}, errStoreDown // the engine's own retries
	}
	return s.Store.Claim(ctx, p)
}

func (s *lostClaimStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if s.getDown.Add(-1) >= 0 {
		return nil, errStoreDown
	}
	return s.Store.Get(ctx, scope, key)
}

// TestLostClaimReleasedWhenTheStoreReturns: a claim whose answer was lost
// in an outage, with the store still away when the engine looks, is
// released once the store answers (no effect ran), so the retry runs the
// effect instead of getting 409 until the lease makes it unknown.
func TestLostClaimReleasedWhenTheStoreReturns(t *testing.T) {
	st := &lostClaimStore{Store: memstore.New()}
	st.getDown.Store(4)
	e := newEngine(t, st, idem.Config{FinishTimeout: 10 * time.Second})
	runs := 0
	h := func(context.Context, *idem.Attempt) ([]byte, error) { runs++; return []byte("v"), nil }
	if _, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, h); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes with the claim's answer lost = %v; want ErrStoreUnavailable", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := st.Store.Get(context.Background(), "", "k")
		if errors.Is(err, idem.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost claim was never released: %+v, %v", rec, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, h); err != nil || r.Replayed || runs != 1 {
		t.Fatalf("retry = %+v, %v, %d runs; want the effect run once, now", r, err, runs)
	}
}
