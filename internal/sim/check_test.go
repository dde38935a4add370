package sim

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// checkWorld is a world with one intent (scope "s", key "k", body "b"),
// its history and its final record as given, ready for check.
func checkWorld(t *testing.T, effects []string, hist []Op, final *idem.Record) *Result {
	t.Helper()
	st := memstore.New()
	w := &world{store: st, byKey: map[skey]*intent{}, byStore: map[skey][]*intent{}, faults: faultCounts{killPhase: map[string]int{}}}
	in := &intent{id: 0, scope: "s", key: "k", body: "b"}
	for _, v := range effects {
		in.effects = append(in.effects, effect{value: v})
	}
	w.intents = []*intent{in}
	w.hist = hist
	if final != nil {
		ctx := context.Background()
		now := epoch
		if _, err := st.Claim(ctx, idem.ClaimParams{Scope: "s", Key: "k", AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Finish(ctx, idem.FinishParams{Scope: "s", Key: "k", Fence: 1, AttemptID: "a", State: final.State,
			Result: final.Result, CompletedAt: now, ExpiresAt: now.Add(ttl)}); err != nil {
			t.Fatal(err)
		}
	}
	return w.check()
}

func ok(call int, body, v string) Op {
	st := idem.StateSucceeded
	if len(v) > 8 && v[:8] == "declined" {
		st = idem.StateFailed
	}
	return Op{Kind: KindOK, Intent: 0, Call: call, Body: body, State: st, Value: v}
}

// TestSimCheckerRules: each rule of the checker fires on a history that
// breaks it, and a clean history passes. (The control runs show the same
// for the rules a broken store trips; these are the others.)
func TestSimCheckerRules(t *testing.T) {
	const v = "ok|s|k|b|1"
	succeeded := &idem.Record{State: idem.StateSucceeded, Result: []byte(v)}
	unknown := Op{Kind: KindIndeterminate, Intent: 0, Call: 2, Body: "b", Detail: "outcome unknown"}
	fault := Op{Kind: KindFault, Intent: 0, Call: -1, Detail: "process 0 killed"}
	for _, tc := range []struct {
		name    string
		effects []string
		hist    []Op
		final   *idem.Record
		want    string // "" for none
	}{
		{"clean", []string{v}, []Op{ok(1, "b", v), ok(2, "b", v)}, succeeded, ""},
		{"two effects", []string{v, "ok|s|k|b|2"}, []Op{ok(1, "b", v)}, succeeded, RuleAtMostOnce},
		{"success without effect", nil, []Op{ok(1, "b", v)}, succeeded, RuleSuccessOnce},
		{"success with another result", []string{"ok|s|k|b|9"}, []Op{ok(1, "b", v)}, nil, RuleSuccessOnce},
		{"replay differs", []string{v}, []Op{ok(1, "b", v), ok(2, "b", v+reconciled)}, succeeded, RuleReplaySame},
		{"record changed after an answer", []string{v}, []Op{ok(1, "b", v+reconciled)}, succeeded, RuleReplaySame},
		{"another scope's answer", []string{v}, []Op{ok(1, "b", "ok|t|k|b|1")}, nil, RuleOwnRequest},
		{"another body's answer", []string{v}, []Op{ok(1, "b2", v)}, succeeded, RuleOwnRequest},
		{"definite failure after an effect", []string{v}, []Op{{Kind: KindFail, Intent: 0, Call: 1, Detail: "store unavailable", Effects: 1}}, succeeded, RuleFailNoEffect},
		{"unknown without a fault", nil, []Op{unknown}, nil, RuleUnknownFault},
		{"unknown before its fault", nil, []Op{unknown, fault}, nil, RuleUnknownFault},
		{"unknown after a fault", nil, []Op{fault, unknown}, nil, ""},
		{"failure answered after an effect", []string{v}, []Op{ok(1, "b", "declined|s|k|b|1")}, nil, RuleRecordAgrees},
		{"record lost", []string{v}, nil, nil, RuleRecordAgrees},
		{"record failed after an effect", []string{v}, nil, &idem.Record{State: idem.StateFailed, Result: []byte("declined|s|k|b|1")}, RuleRecordAgrees},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkWorld(t, tc.effects, tc.hist, tc.final)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			found := false
			for _, v := range r.Violations {
				if v.Rule == tc.want {
					found = true
				}
			}
			switch {
			case tc.want == "" && len(r.Violations) > 0:
				t.Errorf("want no violation, got %v", r.Violations)
			case tc.want != "" && !found:
				t.Errorf("want a %s violation, got %v", tc.want, r.Violations)
			}
		})
	}
}
