package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Kind is what an entry of a history records.
type Kind string

// The kinds of history entries. Invoke, OK, Fail and Indeterminate are a
// client's view of one call; the others are what the world did.
const (
	KindInvoke        Kind = "invoke"
	KindOK            Kind = "ok"            // a complete answer (first or replayed)
	KindFail          Kind = "fail"          // a definite answer that the call did nothing
	KindIndeterminate Kind = "indeterminate" // the client cannot tell
	KindEffect        Kind = "effect"        // the provider applied the effect
	KindFault         Kind = "fault"         // a process died, the store restarted, a lease ran out, …
	KindResolve       Kind = "resolve"       // an operator's resolution
	KindSweep         Kind = "sweep"
	// KindLate: the engine answered a call whose client had given up
	// (not a client's view; the checker ignores it).
	KindLate Kind = "late-answer"
)

// Op is one entry of a world's history.
type Op struct {
	T        time.Duration // simulated time since the world started
	Kind     Kind
	Intent   int // -1: the whole world
	Call     int // -1: no call
	Client   int
	Body     string
	State    idem.State // OK: succeeded or failed
	Value    string     // OK: the answer; Effect: the provider's result
	Replayed bool
	Effects  int // answers: effects the call's own effect applied
	Detail   string
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%12s %-13s", o.T.Round(time.Microsecond), o.Kind)
	if o.Intent >= 0 {
		fmt.Fprintf(&b, " intent=%d", o.Intent)
	}
	if o.Call >= 0 {
		fmt.Fprintf(&b, " call=%d client=%d body=%q", o.Call, o.Client, o.Body)
	}
	if o.State != "" {
		fmt.Fprintf(&b, " %s %q replayed=%v", o.State, o.Value, o.Replayed)
	} else if o.Value != "" {
		fmt.Fprintf(&b, " %q", o.Value)
	}
	if o.Detail != "" {
		fmt.Fprintf(&b, " (%s)", o.Detail)
	}
	return b.String()
}

// Violation is one broken guarantee.
type Violation struct {
	Intent int // -1: the whole world
	Rule   string
	Detail string
}

func (v Violation) String() string {
	if v.Intent < 0 {
		return fmt.Sprintf("%s: %s", v.Rule, v.Detail)
	}
	return fmt.Sprintf("intent %d: %s: %s", v.Intent, v.Rule, v.Detail)
}

// The rules the checker holds a history to.
const (
	RuleAtMostOnce     = "at-most-one-effect"     // per (scope, key)
	RuleSuccessOnce    = "success-means-one"      // a caller saw success: exactly one effect, with that result
	RuleReplaySame     = "replay-identical"       // every complete answer equals the first
	RuleOwnRequest     = "answer-for-own-request" // an answer comes from an effect of the same scope, key and body
	RuleFailNoEffect   = "definite-failure"       // a call told "nothing happened" applied nothing
	RuleUnknownFault   = "unknown-needs-a-fault"  // no unknown without a fault that made it unknowable
	RuleRecordAgrees   = "record-agrees"          // the final record agrees with the provider
	RuleBackgroundBeat = "deterministic"          // nothing ran outside the schedule
)

// Result is a checked world.
type Result struct {
	Config Config
	Plan   plan
	// Requests is the number of engine calls the clients made; Calls
	// includes the ones refused before reaching an engine.
	Requests, Calls int
	Intents         int
	OKs, Fails      int
	Indeterminate   int
	Effects         int
	Unknowns        int // calls answered "outcome unknown"
	Faults          faultCounts
	History         []Op
	Violations      []Violation
	Err             error // the world could not run
}

// Failed reports whether the world broke a guarantee or could not run.
func (r *Result) Failed() bool { return r.Err != nil || len(r.Violations) > 0 }

// Summary is one line of counts.
func (r *Result) Summary() string {
	f := r.Faults
	return fmt.Sprintf("seed %d control %s: %d intents, %d requests (%d ok, %d fail, %d indeterminate, %d unknown), %d effects; faults: %d lost answers, %d resets, %d refused, %d answers lost to store restarts, %d kills (%d at crash points), %d store restarts, %d provider timeouts, %d slow effects; %d resolutions, %d sweeps deleting %d; %d violations",
		r.Config.Seed, r.Config.Control, r.Intents, r.Requests, r.OKs, r.Fails, r.Indeterminate, r.Unknowns, r.Effects,
		f.lost, f.reset, f.refused, f.restartLost, f.kills, f.crashPoints, f.storeRestarts, f.providerTimeouts, f.slowEffects, f.resolutions, f.sweeps, f.swept, len(r.Violations))
}

// KillPhases renders the calls kills cut off, by phase.
func (r *Result) KillPhases() string {
	var parts []string
	for _, ph := range Phases {
		parts = append(parts, fmt.Sprintf("%s: %d", ph, r.Faults.killPhase[ph]))
	}
	return strings.Join(parts, ", ")
}

// IntentHistory returns the entries of intent id, and the world-wide
// faults, in order.
func (r *Result) IntentHistory(ids map[int]bool) []Op {
	var out []Op
	for _, o := range r.History {
		if o.Intent < 0 || ids[o.Intent] {
			out = append(out, o)
		}
	}
	return out
}

// parseAnswer splits a provider result "ok|scope|key|body|n" or
// "declined|scope|key|body|n".
func parseAnswer(v string) (kind, scope, key, body string, ok bool) {
	p := strings.Split(v, "|")
	if len(p) != 5 {
		return "", "", "", "", false
	}
	return p[0], p[1], p[2], p[3], true
}

func (w *world) check() *Result {
	res := &Result{History: w.hist, Faults: w.faults, Intents: len(w.intents), Calls: w.calls}
	if len(w.errs) > 0 {
		res.Err = errors.Join(w.errs...)
	}
	res.Violations = append(res.Violations, w.worldViolations...)
	if w.backgroundBeats > 0 {
		res.Violations = append(res.Violations, Violation{Intent: -1, Rule: RuleBackgroundBeat,
			Detail: fmt.Sprintf("%d heartbeats came from the engine's wall-clock schedule", w.backgroundBeats)})
	}
	byIntent := map[int][]Op{}
	for _, o := range w.hist {
		if o.Intent >= 0 {
			byIntent[o.Intent] = append(byIntent[o.Intent], o)
		}
		switch o.Kind {
		case KindInvoke:
		case KindOK:
			res.OKs++
		case KindFail:
			res.Fails++
		case KindIndeterminate:
			res.Indeterminate++
			if o.Detail == "outcome unknown" {
				res.Unknowns++
			}
		case KindEffect:
			res.Effects++
		}
	}
	res.Requests = res.OKs + res.Fails + res.Indeterminate
	ctx := context.Background()
	for _, in := range w.intents {
		add := func(rule, format string, a ...any) {
			res.Violations = append(res.Violations, Violation{Intent: in.id, Rule: rule, Detail: fmt.Sprintf(format, a...)})
		}
		ops := byIntent[in.id]
		if n := len(in.effects); n > 1 {
			add(RuleAtMostOnce, "the provider applied the effect %d times (calls %v)", n, effectCalls(in))
		}
		var first *Op
		faults := 0 // faults on the intent so far
		for i := range ops {
			o := &ops[i]
			switch o.Kind {
			case KindFault:
				faults++
			case KindOK:
				kind, scope, key, body, ok := parseAnswer(o.Value)
				if !ok {
					add(RuleOwnRequest, "call %d got %q, which no effect produced", o.Call, o.Value)
					continue
				}
				if scope != in.scope || key != in.key {
					add(RuleOwnRequest, "call %d in scope %q got the answer of scope %q key %q: %q", o.Call, in.scope, scope, key, o.Value)
				} else if body != o.Body {
					add(RuleOwnRequest, "call %d with body %q got the answer of a request with body %q: %q", o.Call, o.Body, body, o.Value)
				}
				if (kind == "ok") != (o.State == idem.StateSucceeded) {
					add(RuleOwnRequest, "call %d got state %s with value %q", o.Call, o.State, o.Value)
				}
				if first == nil {
					first = o
				} else if first.State != o.State || first.Value != o.Value {
					add(RuleReplaySame, "call %d got %s %q, call %d first got %s %q", o.Call, o.State, o.Value, first.Call, first.State, first.Value)
				}
				if o.State == idem.StateSucceeded {
					if len(in.effects) != 1 {
						add(RuleSuccessOnce, "call %d saw success %q with %d effects", o.Call, o.Value, len(in.effects))
					} else if v := in.effects[0].value; o.Value != v && o.Value != v+reconciled {
						add(RuleSuccessOnce, "call %d saw success %q; the provider's result is %q", o.Call, o.Value, in.effects[0].value)
					}
				} else if len(in.effects) > 0 {
					add(RuleRecordAgrees, "call %d was answered the recorded failure %q, but the provider applied %q", o.Call, o.Value, in.effects[0].value)
				}
			case KindFail:
				if o.Effects > 0 {
					add(RuleFailNoEffect, "call %d was told %q after its effect ran", o.Call, o.Detail)
				}
			case KindIndeterminate:
				if o.Detail == "outcome unknown" && faults == 0 {
					add(RuleUnknownFault, "call %d was answered unknown with no fault on the intent before it", o.Call)
				}
			}
		}
		// The record the world ends with.
		rec, err := w.store.Get(ctx, w.storeScope(in.scope), in.key)
		switch {
		case errors.Is(err, idem.ErrNotFound):
			if len(in.effects) > 0 && !in.swept {
				add(RuleRecordAgrees, "the provider applied %q but the record is gone (never swept)", in.effects[0].value)
			}
		case err != nil:
			res.Err = errors.Join(res.Err, err)
		case w.cfg.Control == ControlGlobalScope:
			// One record holds several intents: nothing to compare.
		case first != nil && rec.State.Terminal() && (rec.State != first.State || string(rec.Result) != first.Value):
			// What a caller was told is what the record must go on replaying.
			add(RuleReplaySame, "call %d was answered %s %q; the record now holds %s %q", first.Call, first.State, first.Value, rec.State, rec.Result)
		case rec.State == idem.StateSucceeded:
			if len(in.effects) != 1 {
				add(RuleRecordAgrees, "the record is succeeded %q with %d effects", rec.Result, len(in.effects))
			} else if v := in.effects[0].value; string(rec.Result) != v && string(rec.Result) != v+reconciled {
				add(RuleRecordAgrees, "the record holds %q; the provider's result is %q", rec.Result, in.effects[0].value)
			}
		case rec.State == idem.StateFailed:
			if len(in.effects) > 0 {
				add(RuleRecordAgrees, "the record is failed %q but the provider applied %q", rec.Result, in.effects[0].value)
			}
		case rec.State == idem.StateUnknown || rec.State == idem.StateInProgress:
			if len(in.faulted) == 0 {
				add(RuleUnknownFault, "the record ends %s with no fault on the intent", rec.State)
			}
		}
	}
	sort.SliceStable(res.Violations, func(i, j int) bool { return res.Violations[i].Intent < res.Violations[j].Intent })
	return res
}

func effectCalls(in *intent) []int {
	var c []int
	for _, e := range in.effects {
		c = append(c, e.call)
	}
	return c
}
