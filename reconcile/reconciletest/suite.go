// Package reconciletest is the reconciler's test suite, run against every
// store: memstore from reconcile's tests, SQLite and PostgreSQL from their
// stores' modules (which the root module must not require), and any
// third-party store the same way: call [Run] from a test with a function
// that returns a fresh store.
package reconciletest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/storetest"
)

// NewStore returns a fresh, empty, isolated store; the suite closes it.
type NewStore func(t *testing.T) idem.Store

// Run runs every reconciliation test against one kind of store.
func Run(t *testing.T, newStore NewStore) {
	tests := map[string]func(*testing.T, *fixture){
		"Reconciled":                testReconciled,
		"UnderCountedUnknown":       testUnderCountedUnknown,
		"UnderCountedExpiredLease":  testUnderCountedExpiredLease,
		"UnderCountedNoLocal":       testUnderCountedNoLocal,
		"OverCounted":               testOverCounted,
		"OverCountedDeclined":       testOverCountedDeclined,
		"Drift":                     testDrift,
		"DriftFailedButApplied":     testDriftFailedButApplied,
		"NotAppliedFail":            testNotAppliedFail,
		"NotAppliedRelease":         testNotAppliedRelease,
		"ProviderCannotTell":        testProviderCannotTell,
		"ProviderDownKeepsFindings": testProviderDownKeepsFindings,
		"Idempotent":                testIdempotent,
		"RecoveryHook":              testRecoveryHook,
		"RedriveOnlyWhenDeclared":   testRedriveOnlyWhenDeclared,
		"StartStop":                 testStartStop,
		"CrashWindowFromClaim":      testCrashWindowFromClaim,
		"DuplicateKey":              testDuplicateKey,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			t.Cleanup(func() { _ = st.Close() })
			fn(t, newFixture(t, st, reconcile.Config{}))
		})
	}
}

// fixture is an engine on a fake clock, a fake provider and a reconciler.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	st    *countingStore
	clock *storetest.Clock
	eng   *idem.Engine
	prov  *fakeProvider
	rec   *reconcile.Reconciler
}

const window = time.Hour

func newFixture(t *testing.T, st idem.Store, cfg reconcile.Config) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	clock := storetest.NewClock()
	cs := &countingStore{Store: st}
	eng, err := idem.New(cs, idem.Config{Clock: clock.Now, TTL: 72 * time.Hour, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	f := &fixture{t: t, ctx: ctx, st: cs, clock: clock, eng: eng, prov: newFake()}
	f.reconciler(cfg)
	return f
}

// reconciler replaces f.rec with one built from cfg, with a small batch
// size so that paging is exercised.
func (f *fixture) reconciler(cfg reconcile.Config) {
	f.t.Helper()
	if cfg.SettlementWindow == 0 {
		cfg.SettlementWindow = window
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 2
	}
	r, err := reconcile.New(f.eng, f.prov, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.rec = r
}

type outcome int

const (
	ok outcome = iota
	fails
	unknown
)

// charge runs a charge intent whose effect ends as out.
func (f *fixture) charge(key string, amount int64, cur string, out outcome) {
	f.t.Helper()
	_, err := f.eng.DoBytes(f.ctx, idem.Request{Scope: "shop", Key: idem.Key(key), Operation: "charge",
		Intent: &idem.Intent{Operation: "charge", Amount: amount, Currency: cur, ForwardKey: "fwd-" + key}},
		func(context.Context, *idem.Attempt) ([]byte, error) {
			switch out {
			case fails:
				return nil, errors.New("card declined")
			case unknown:
				return nil, idem.Unknown(errors.New("response lost"))
			}
			return []byte(`{"charged":true}`), nil
		})
	want := map[outcome]error{ok: nil, fails: idem.ErrRecordedFailure, unknown: idem.ErrUnknownOutcome}[out]
	if !errors.Is(err, want) {
		f.t.Fatalf("charge %s: err = %v, want %v", key, err, want)
	}
}

func (f *fixture) run() *reconcile.Report {
	f.t.Helper()
	rep, err := f.rec.RunOnce(f.ctx)
	if err != nil {
		f.t.Fatalf("RunOnce: %v", err)
	}
	return rep
}

func (f *fixture) get(key string) *idem.Record {
	f.t.Helper()
	r, err := f.st.Get(f.ctx, "shop", key)
	if err != nil {
		f.t.Fatalf("get %s: %v", key, err)
	}
	return r
}

// snapshot lists every record, for comparing before and after a run.
func (f *fixture) snapshot() []idem.Record {
	f.t.Helper()
	recs, err := f.st.List(f.ctx, idem.ListFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

func wantClass(t *testing.T, rep *reconcile.Report, class reconcile.Class, keys ...string) {
	t.Helper()
	got := rep.Keys[class]
	if len(got) != len(keys) || (len(keys) > 0 && !reflect.DeepEqual(got, keys)) {
		t.Fatalf("%s keys = %v, want %v (counts %v, findings %+v, errors %v)", class, got, keys, rep.Counts, rep.Findings, rep.Errors)
	}
	if rep.Counts[class] != len(keys) {
		t.Fatalf("%s count = %d, want %d", class, rep.Counts[class], len(keys))
	}
}

func wantState(t *testing.T, r *idem.Record, st idem.State, m idem.Mark) {
	t.Helper()
	if r.State != st || r.Mark != m {
		t.Fatalf("record %s: state %s mark %q, want %s %q", r.Key, r.State, r.Mark, st, m)
	}
}

func testReconciled(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", ok)
	f.charge("b", 700, "EUR", fails)
	f.prov.apply("fwd-a", 500, "EUR", f.clock.Now())
	f.clock.Advance(window) // b: the provider's silence is now final
	rep := f.run()
	wantClass(t, rep, reconcile.ClassReconciled, "a", "b")
	wantState(t, f.get("a"), idem.StateSucceeded, idem.MarkReconciled)
	wantState(t, f.get("b"), idem.StateFailed, idem.MarkReconciled)
	if !rep.Clean() || rep.DriftCount != 0 || rep.OldestUnreconciled != 0 {
		t.Fatalf("report not clean: %+v", rep)
	}
	// The next run skips both without asking the provider again.
	before := f.prov.lookups
	rep = f.run()
	wantClass(t, rep, reconcile.ClassReconciled)
	if rep.Counts[reconcile.ClassSkipped] != 2 || f.prov.lookups != before {
		t.Fatalf("second run: skipped %d, lookups %d → %d", rep.Counts[reconcile.ClassSkipped], before, f.prov.lookups)
	}
}

func testUnderCountedUnknown(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", unknown)
	f.prov.apply("fwd-a", 500, "EUR", f.clock.Now())
	rep := f.run()
	wantClass(t, rep, reconcile.ClassUnderCounted, "a")
	r := f.get("a")
	wantState(t, r, idem.StateSucceeded, idem.MarkReconciled)
	var got reconcile.Applied
	if err := json.Unmarshal(r.Result, &got); err != nil || got.Key != "fwd-a" || got.Amount != 500 {
		t.Fatalf("recorded result %s (%v), want the provider's entry", r.Result, err)
	}
	if !rep.Clean() {
		t.Fatal("an under-count that was recorded is not a finding to page about")
	}
}

// testUnderCountedExpiredLease covers a crash: the claim is in_progress,
// its holder is gone, and the provider did apply the key.
func testUnderCountedExpiredLease(t *testing.T, f *fixture) {
	now := f.clock.Now()
	in, _ := json.Marshal(idem.Intent{Operation: "charge", Amount: 900, Currency: "USD", ForwardKey: "fwd-crash"})
	if _, err := f.st.Claim(f.ctx, idem.ClaimParams{Scope: "shop", Key: "crash", AttemptID: "dead",
		Intent: in, Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	f.prov.apply("fwd-crash", 900, "USD", now)
	wantClass(t, f.run(), reconcile.ClassPending, "crash") // lease still live: hands off
	f.clock.Advance(2 * time.Minute)
	wantClass(t, f.run(), reconcile.ClassUnderCounted, "crash")
	wantState(t, f.get("crash"), idem.StateSucceeded, idem.MarkReconciled)
}

func testUnderCountedNoLocal(t *testing.T, f *fixture) {
	f.prov.put(reconcile.Applied{Key: "lost-1", Scope: "shop", Amount: 300, Currency: "EUR",
		Status: reconcile.StatusApplied, AppliedAt: f.clock.Now()})
	f.prov.put(reconcile.Applied{Key: "declined-1", Scope: "shop", Amount: 300, Currency: "EUR",
		Status: reconcile.StatusFailed, AppliedAt: f.clock.Now()})
	f.clock.Advance(time.Second)
	rep := f.run()
	wantClass(t, rep, reconcile.ClassUnderCounted, "lost-1")
	wantState(t, f.get("lost-1"), idem.StateSucceeded, idem.MarkReconciled)
	if _, err := f.st.Get(f.ctx, "shop", "declined-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("a declined entry with no local record must not be recorded: %v", err)
	}
	// A client retry with that key can no longer run the effect.
	ran := false
	_, err := f.eng.DoBytes(f.ctx, idem.Request{Scope: "shop", Key: "lost-1"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		ran = true
		return nil, nil
	})
	if ran || err != nil {
		t.Fatalf("retry of a recorded key ran=%v err=%v", ran, err)
	}
	before := f.snapshot()
	rep = f.run()
	wantClass(t, rep, reconcile.ClassUnderCounted)
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("second run changed records:\n%+v\n%+v", before, after)
	}
}

func testOverCounted(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", ok)
	wantClass(t, f.run(), reconcile.ClassPending, "a") // the provider may still settle it
	f.clock.Advance(window)
	rep := f.run()
	wantClass(t, rep, reconcile.ClassOverCounted, "a")
	wantState(t, f.get("a"), idem.StateSucceeded, idem.MarkOverCounted)
	if rep.Clean() || rep.OldestUnreconciled < window {
		t.Fatalf("over-count: clean=%v oldest=%s", rep.Clean(), rep.OldestUnreconciled)
	}
	// Still reported on the next run (it needs a person), without a write.
	writes := f.st.writes.Load()
	wantClass(t, f.run(), reconcile.ClassOverCounted, "a")
	if w := f.st.writes.Load() - writes; w != 0 {
		t.Fatalf("second run made %d writes to an over-counted record", w)
	}
	// The provider's late settlement clears it.
	f.prov.apply("fwd-a", 500, "EUR", f.clock.Now())
	wantClass(t, f.run(), reconcile.ClassReconciled, "a")
	wantState(t, f.get("a"), idem.StateSucceeded, idem.MarkReconciled)
}

func testOverCountedDeclined(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", ok)
	f.prov.put(reconcile.Applied{Key: "fwd-a", Amount: 500, Currency: "EUR", Status: reconcile.StatusFailed, AppliedAt: f.clock.Now()})
	wantClass(t, f.run(), reconcile.ClassOverCounted, "a") // a decline is final: no window
}

func testDrift(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", ok)
	f.charge("b", 500, "EUR", ok)
	f.charge("c", 100, "EUR", ok)
	f.prov.apply("fwd-a", 450, "EUR", f.clock.Now())
	f.prov.apply("fwd-b", 500, "USD", f.clock.Now())
	f.prov.apply("fwd-c", 130, "EUR", f.clock.Now())
	rep := f.run()
	wantClass(t, rep, reconcile.ClassDrift, "a", "b", "c")
	if rep.DriftCount != 3 {
		t.Fatalf("drift_count = %d", rep.DriftCount)
	}
	// |450-500| + |130-100| in EUR (never cancelling out), 500 in USD.
	want := map[string]int64{"EUR": 50 + 30 + 500, "USD": 500}
	if !reflect.DeepEqual(rep.DriftAmount, want) {
		t.Fatalf("drift_amount = %v, want %v", rep.DriftAmount, want)
	}
	wantState(t, f.get("a"), idem.StateSucceeded, idem.MarkDrift)
	if rep.Clean() {
		t.Fatal("drift reported clean")
	}
}

func testDriftFailedButApplied(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", fails)
	f.prov.apply("fwd-a", 500, "EUR", f.clock.Now())
	rep := f.run()
	wantClass(t, rep, reconcile.ClassDrift, "a")
	wantState(t, f.get("a"), idem.StateFailed, idem.MarkDrift)
	if rep.DriftAmount["EUR"] != 500 {
		t.Fatalf("drift_amount = %v", rep.DriftAmount)
	}
}

func testNotAppliedFail(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", unknown)
	wantClass(t, f.run(), reconcile.ClassPending, "a")
	wantState(t, f.get("a"), idem.StateUnknown, idem.MarkNone)
	f.clock.Advance(window)
	wantClass(t, f.run(), reconcile.ClassNotApplied, "a")
	wantState(t, f.get("a"), idem.StateFailed, idem.MarkReconciled)
}

func testNotAppliedRelease(t *testing.T, f *fixture) {
	f.reconciler(reconcile.Config{NotApplied: reconcile.ActionRelease})
	f.charge("a", 500, "EUR", unknown)
	f.charge("b", 500, "EUR", unknown)
	f.clock.Advance(window)
	wantClass(t, f.run(), reconcile.ClassNotApplied, "a", "b")
	if _, err := f.st.Get(f.ctx, "shop", "a"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("released record still there: %v", err)
	}
	f.reconciler(reconcile.Config{NotApplied: reconcile.ActionLeave})
	f.charge("c", 500, "EUR", unknown)
	f.clock.Advance(window)
	wantClass(t, f.run(), reconcile.ClassPending, "c")
	wantState(t, f.get("c"), idem.StateUnknown, idem.MarkNone)
}

func testProviderCannotTell(t *testing.T, f *fixture) {
	f.charge("a", 500, "EUR", unknown)
	f.charge("b", 500, "EUR", ok)
	f.clock.Advance(window)
	f.prov.fail = errProviderDown
	rep := f.run()
	wantClass(t, rep, reconcile.ClassPending, "a", "b")
	if len(rep.Errors) != 2 {
		t.Fatalf("errors = %v", rep.Errors)
	}
	wantState(t, f.get("a"), idem.StateUnknown, idem.MarkNone)
	wantState(t, f.get("b"), idem.StateSucceeded, idem.MarkNone)
}

// testProviderDownKeepsFindings: drift and over-counted findings of an
// earlier run stay in the report (and so in the exit status and the
// metrics) while the provider cannot be asked; the record is not touched.
func testProviderDownKeepsFindings(t *testing.T, f *fixture) {
	f.charge("drift", 500, "EUR", ok)
	f.charge("over", 300, "EUR", ok)
	f.charge("fine", 100, "EUR", ok)
	f.prov.apply("fwd-drift", 450, "EUR", f.clock.Now())
	f.prov.apply("fwd-fine", 100, "EUR", f.clock.Now())
	f.clock.Advance(window)
	rep := f.run()
	wantClass(t, rep, reconcile.ClassDrift, "drift")
	wantClass(t, rep, reconcile.ClassOverCounted, "over")

	f.prov.fail = errProviderDown
	writes := f.st.writes.Load()
	rep = f.run()
	wantClass(t, rep, reconcile.ClassDrift, "drift")
	wantClass(t, rep, reconcile.ClassOverCounted, "over")
	wantClass(t, rep, reconcile.ClassPending)
	if rep.Clean() || rep.Complete() || rep.DriftCount != 1 || len(rep.Errors) != 2 {
		t.Fatalf("provider down: clean=%v complete=%v drift_count=%d errors=%v", rep.Clean(), rep.Complete(), rep.DriftCount, rep.Errors)
	}
	if len(rep.DriftAmount) != 0 {
		t.Fatalf("drift_amount = %v: nothing was compared this run", rep.DriftAmount)
	}
	for _, fd := range rep.Findings {
		if !fd.Kept {
			t.Fatalf("finding %+v not marked kept", fd)
		}
	}
	if w := f.st.writes.Load() - writes; w != 0 {
		t.Fatalf("run with the provider down made %d writes", w)
	}
	wantState(t, f.get("drift"), idem.StateSucceeded, idem.MarkDrift)
}

// testIdempotent runs the reconciler twice over every class at once: the
// second run writes nothing and reports the same findings.
func testIdempotent(t *testing.T, f *fixture) {
	f.charge("agree", 100, "EUR", ok)
	f.charge("drift", 100, "EUR", ok)
	f.charge("over", 100, "EUR", ok)
	f.charge("under", 100, "EUR", unknown)
	f.charge("never", 100, "EUR", unknown)
	f.charge("failed", 100, "EUR", fails)
	at := f.clock.Now()
	f.prov.apply("fwd-agree", 100, "EUR", at)
	f.prov.apply("fwd-drift", 90, "EUR", at)
	f.prov.apply("fwd-under", 100, "EUR", at)
	f.prov.put(reconcile.Applied{Key: "orphan", Scope: "shop", Amount: 100, Currency: "EUR", Status: reconcile.StatusApplied, AppliedAt: at})
	f.clock.Advance(window)
	first := f.run()
	if first.Counts[reconcile.ClassSkipped] != 0 || len(first.Errors) != 0 {
		t.Fatalf("first run: %+v", first)
	}
	wantClass(t, first, reconcile.ClassReconciled, "agree", "failed")
	wantClass(t, first, reconcile.ClassUnderCounted, "orphan", "under")
	wantClass(t, first, reconcile.ClassNotApplied, "never")
	before, writes := f.snapshot(), f.st.writes.Load()
	second := f.run()
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("second run changed records:\n%+v\n%+v", before, after)
	}
	if w := f.st.writes.Load() - writes; w != 0 {
		t.Fatalf("second run made %d store writes, want 0", w)
	}
	wantClass(t, second, reconcile.ClassDrift, "drift")
	wantClass(t, second, reconcile.ClassOverCounted, "over")
	for _, c := range []reconcile.Class{reconcile.ClassReconciled, reconcile.ClassUnderCounted, reconcile.ClassNotApplied} {
		wantClass(t, second, c)
	}
	if second.Counts[reconcile.ClassSkipped] != 5 || !reflect.DeepEqual(first.DriftAmount, second.DriftAmount) {
		t.Fatalf("second run: skipped %d, drift %v vs %v", second.Counts[reconcile.ClassSkipped], second.DriftAmount, first.DriftAmount)
	}
}

// testStartStop runs the reconciler as a service: it runs at once, reports
// through OnRun, refuses a second Start, and Stop waits for it.
func testStartStop(t *testing.T, f *fixture) {
	runs := make(chan *reconcile.Report, 4)
	f.reconciler(reconcile.Config{Interval: time.Hour, OnRun: func(r *reconcile.Report, err error) {
		if err == nil {
			runs <- r
		}
	}})
	f.charge("a", 100, "EUR", ok)
	f.prov.apply("fwd-a", 100, "EUR", f.clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.rec.Start(ctx); err == nil {
		t.Fatal("second Start accepted")
	}
	select {
	case r := <-runs:
		wantClass(t, r, reconcile.ClassReconciled, "a")
	case <-time.After(30 * time.Second):
		t.Fatal("no run reported")
	}
	f.rec.Stop()
	f.rec.Stop() // idempotent
	wantState(t, f.get("a"), "succeeded", "reconciled")
}

// testCrashWindowFromClaim: the settlement window of a record left by a
// crash counts from its claim (its attempt could start the effect only
// while it held the lease), not from when the crash was noticed — by the
// reconciler's first run, or by a reader that turned it unknown later.
func testCrashWindowFromClaim(t *testing.T, f *fixture) {
	start := f.clock.Now()
	for _, key := range []string{"crash", "noticed"} {
		in, _ := json.Marshal(idem.Intent{Operation: "charge", Amount: 900, Currency: "USD", ForwardKey: "fwd-" + key})
		if _, err := f.st.Claim(f.ctx, idem.ClaimParams{Scope: "shop", Key: key, AttemptID: "dead-" + key,
			Intent: in, Now: start, LeaseUntil: start.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// 50 minutes later a retry of "noticed" finds the lease gone and the
	// record becomes unknown then.
	f.clock.Advance(50 * time.Minute)
	if _, err := f.st.Finish(f.ctx, idem.FinishParams{Scope: "shop", Key: "noticed", Fence: 1, AttemptID: "dead-noticed",
		State: idem.StateUnknown, CompletedAt: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// The window (an hour) has passed since the claims, not since either
	// was seen: the provider's silence now means "never applied".
	f.clock.Advance(12 * time.Minute)
	rep := f.run()
	wantClass(t, rep, reconcile.ClassNotApplied, "crash", "noticed")
	wantState(t, f.get("crash"), idem.StateFailed, idem.MarkReconciled)
}

// testDuplicateKey: a key the provider lists twice is a finding of its
// own — for a succeeded record, an unknown one (decided, since the
// provider applied it), a key with no local record, and one an earlier run
// had reconciled — while every other key still reconciles.
func testDuplicateKey(t *testing.T, f *fixture) {
	now := f.clock.Now()
	f.charge("a", 500, "EUR", ok)
	f.charge("b", 700, "EUR", ok)
	f.charge("c", 900, "EUR", unknown)
	twice := func(key string, amount int64) {
		first := reconcile.Applied{Key: key, Amount: amount, Currency: "EUR", Status: reconcile.StatusApplied, AppliedAt: now, Line: 2}
		again := first
		again.Line = 9
		first.Repeats = []reconcile.Applied{again}
		f.prov.put(first)
	}
	twice("fwd-a", 500)
	f.prov.apply("fwd-b", 700, "EUR", now)
	twice("fwd-c", 900)
	twice("fwd-d", 300) // no local record
	rep := f.run()
	wantClass(t, rep, reconcile.ClassDuplicate, "a", "c", "fwd-d")
	wantClass(t, rep, reconcile.ClassReconciled, "b")
	if rep.Clean() {
		t.Fatal("a report with a key the provider lists twice is clean")
	}
	for _, fd := range rep.Findings {
		if fd.Class == reconcile.ClassDuplicate && (fd.Provider != 2*map[string]int64{"a": 500, "c": 900, "fwd-d": 300}[fd.Key] ||
			!strings.Contains(fd.Detail, "2 times (lines 2, 9)")) {
			t.Errorf("duplicate finding %+v: want the provider's two entries summed and their lines", fd)
		}
	}
	wantState(t, f.get("a"), idem.StateSucceeded, idem.MarkDrift)
	wantState(t, f.get("c"), idem.StateSucceeded, idem.MarkDrift)
	// Reported again on the next run, until a person resolves it.
	wantClass(t, f.run(), reconcile.ClassDuplicate, "a", "c", "fwd-d")
	// b was reconciled (and is not asked about again); a later file lists
	// it twice: the duplicate is still found.
	twice("fwd-b", 700)
	rep = f.run()
	wantClass(t, rep, reconcile.ClassDuplicate, "a", "b", "c", "fwd-d")
	wantState(t, f.get("b"), idem.StateSucceeded, idem.MarkDrift)
}
