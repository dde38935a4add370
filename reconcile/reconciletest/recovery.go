package reconciletest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
)

func testRecoveryHook(t *testing.T, f *fixture) {
	down := newFake()
	down.fail = errProviderDown
	r, err := reconcile.NewRecoverer(f.eng, reconcile.RecovererConfig{Hooks: map[string]reconcile.Hook{
		"charge": {Provider: f.prov, SettlementWindow: window,
			Result: func(a reconcile.Applied) ([]byte, error) { return []byte(`{"charged":true}`), nil }},
		"payout": {Provider: down},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"applied", "declined", "silent"} {
		f.charge(k, 100, "EUR", unknown)
	}
	_, err = f.eng.DoBytes(f.ctx, idem.Request{Scope: "shop", Key: "payout-1", Intent: &idem.Intent{Operation: "payout"}},
		func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(nil) })
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	_, err = f.eng.DoBytes(f.ctx, idem.Request{Scope: "shop", Key: "refund-1", Intent: &idem.Intent{Operation: "refund"}},
		func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(nil) })
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	f.prov.apply("fwd-applied", 100, "EUR", f.clock.Now())
	f.prov.put(reconcile.Applied{Key: "fwd-declined", Status: reconcile.StatusFailed})

	counts, err := r.RunOnce(f.ctx)
	if !errors.Is(err, errProviderDown) {
		t.Fatalf("RunOnce error = %v, want the payout provider's failure", err)
	}
	want := map[reconcile.Decision]int{reconcile.DecidedApplied: 1, reconcile.DecidedNotApplied: 1,
		reconcile.Undecided: 2, reconcile.NoHook: 1}
	if len(counts) != len(want) {
		t.Fatalf("decisions %v, want %v", counts, want)
	}
	for d, n := range want {
		if counts[d] != n {
			t.Fatalf("decisions %v, want %v", counts, want)
		}
	}
	applied := f.get("applied")
	if applied.State != idem.StateSucceeded || string(applied.Result) != `{"charged":true}` {
		t.Fatalf("applied: %s %s", applied.State, applied.Result)
	}
	wantState(t, f.get("declined"), idem.StateFailed, idem.MarkNone)
	wantState(t, f.get("silent"), idem.StateUnknown, idem.MarkNone)
	wantState(t, f.get("payout-1"), idem.StateUnknown, idem.MarkNone)
	wantState(t, f.get("refund-1"), idem.StateUnknown, idem.MarkNone)

	// Past the settlement window the provider's silence decides.
	f.clock.Advance(window)
	d, err := r.Recover(f.ctx, *f.get("silent"))
	if d != reconcile.DecidedNotApplied || err != nil {
		t.Fatalf("silent past the window: %s, %v", d, err)
	}
	wantState(t, f.get("silent"), idem.StateFailed, idem.MarkNone)
	// A decided record is not recovery's business.
	if d, err := r.Recover(f.ctx, *f.get("applied")); d != reconcile.Undecided || err != nil {
		t.Fatalf("decided record: %s, %v", d, err)
	}
}

// idempotentProvider applies each forwarded key once, as a provider with
// idempotency-key support does, and counts calls and applications.
type idempotentProvider struct {
	calls   int
	applied map[string]int
}

func (p *idempotentProvider) charge(key string) {
	p.calls++
	if _, dup := p.applied[key]; !dup {
		p.applied[key]++
	}
}

// testRedriveOnlyWhenDeclared: a duplicate of an unknown intent re-runs the
// effect only when the operation is declared re-drivable, and then under a
// new fence with the same forwarded key.
func testRedriveOnlyWhenDeclared(t *testing.T, f *fixture) {
	p := &idempotentProvider{applied: map[string]int{}}
	var fences []int64
	do := func(key string, redrivable bool, lose bool) error {
		_, err := f.eng.DoBytes(f.ctx, idem.Request{Scope: "shop", Key: idem.Key(key), Operation: "charge",
			Intent: &idem.Intent{Operation: "charge", Amount: 100, Currency: "EUR", ForwardKey: "charge:v1:" + key},
			Policy: idem.Policy{Redrivable: redrivable}},
			func(_ context.Context, a *idem.Attempt) ([]byte, error) {
				p.charge(a.ForwardKey())
				fences = append(fences, a.Fence)
				if lose {
					return nil, idem.Unknown(errors.New("response lost"))
				}
				return []byte("ok"), nil
			})
		return err
	}
	if err := do("plain", false, true); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if err := do("plain", false, false); !errors.Is(err, idem.ErrUnknownOutcome) || p.calls != 1 {
		t.Fatalf("undeclared operation re-driven: err %v, provider calls %d", err, p.calls)
	}
	if err := do("redrive", true, true); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if err := do("redrive", true, false); err != nil {
		t.Fatalf("declared re-drive: %v", err)
	}
	if p.calls != 3 || p.applied["charge:v1:redrive"] != 1 || fences[2] <= fences[1] {
		t.Fatalf("calls %d, applied %v, fences %v: want 3 calls, one application, a new fence", p.calls, p.applied, fences)
	}
	if r := f.get("redrive"); r.State != idem.StateSucceeded {
		t.Fatalf("re-driven record %s", r.State)
	}
	_ = time.Second
}
