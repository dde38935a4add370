// Package idemtest puts a user's HTTP handler or engine operation through the
// checks that show it is exactly-once: replay, divergence, concurrency, crash
// at each phase, lost store answers, retention at the boundary and
// observability. Call it from your own tests:
//
//	func TestCharge(t *testing.T) {
//		idemtest.HTTP(t, &idemtest.Built{Build: newServer}, idemtest.Case{
//			Path: "/charges", Body: `{"amount":100}`, Effects: ledger.Count,
//		})
//	}
//
// Each failed check reports, with t.Errorf, what was sent, what came back,
// what was expected and how to fix it, then the next check runs.
//
// Two kinds of HTTP target are accepted. A plain [http.Handler] (built on
// idemhttp or not) gets the checks that can be seen from outside: replay,
// divergence and concurrency. A [Built] handler is rebuilt by idemtest over an
// engine it controls (memstore by default, or the store you give), so it also
// gets the crash, lost-answer, retention and observability checks. [Op] does
// the same for an operation run by an [idem.Engine].
//
// The package depends only on the standard library and idem's own packages.
//
// Package [github.com/idemkit/idem/idemtest/mutation] checks the checks: it
// removes the guards of your handler one at a time, from a list you keep,
// and fails unless a test (these checks, or your own) notices each.
package idemtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/burst"
	"github.com/idemkit/idem/storetest"
)

// Check names one check.
type Check string

// The checks, in the order they run.
const (
	// Replay: the same key and request twice give identical answers and
	// one effect.
	Replay Check = "replay"
	// Divergence: the same key with another request is refused (HTTP 422,
	// idem.ErrMismatch); the same JSON body with its members reordered and
	// re-spaced is a replay.
	Divergence Check = "divergence"
	// Concurrency: N identical requests at once give one effect; every
	// answer is the recorded one or an in-flight refusal.
	Concurrency Check = "concurrency"
	// Crash: the process dies after the claim, during the effect, after the
	// effect before its outcome is recorded, and after it is recorded; a
	// duplicate sent to a restarted process after the lease never re-runs
	// the effect: it gets unknown (HTTP 409, idem.ErrUnknownOutcome), or the
	// recorded answer when the outcome reached the store.
	Crash Check = "crash"
	// LostAnswers: the store applies a claim and an outcome but their
	// answers are lost, and the store fails once; the caller still gets one
	// effect and a replayable answer.
	LostAnswers Check = "lost-answers"
	// Retention: a duplicate just before the TTL replays; one just after it
	// is a new intent.
	Retention Check = "retention"
	// Observability: the engine's observer sees first, replay, mismatch and
	// unknown outcomes.
	Observability Check = "observability"
)

// AllChecks lists every check in the order they run.
var AllChecks = []Check{Replay, Divergence, Concurrency, Crash, LostAnswers, Retention, Observability}

// outsideChecks are those a plain handler gets.
var outsideChecks = []Check{Replay, Divergence, Concurrency}

// DefaultConcurrency is how many identical requests the concurrency check
// sends at once.
const DefaultConcurrency = 64

// answer is what one call returned, in a form the checks compare.
type answer interface {
	// ok reports a successful first or replayed answer.
	ok() bool
	// mismatch reports a refusal for a key reused with another request.
	mismatch() bool
	// inFlight reports a refusal because another attempt holds the key.
	inFlight() bool
	// unknown reports an outcome that could not be decided.
	unknown() bool
	// same reports whether two answers are identical for a client.
	same(other answer) bool
	String() string
}

// variant selects which request a target sends.
type variant int

const (
	original  variant = iota
	changed           // another request
	reordered         // the same JSON body, members reordered and re-spaced
)

// target is what the checks drive: a handler or an operation.
type target interface {
	// send sends one request with key.
	send(key string, v variant) answer
	// describe says, for messages, what was sent.
	describe(key string, v variant) string
	// effects returns the effects counted so far, and false when nothing
	// counts them.
	effects() (int, bool)
	// canReorder reports whether the reordered variant exists.
	canReorder() bool
	// deep reports whether the target can be rebuilt over another store.
	deep() bool
	// rebuild returns the target over st with cfg (only when deep).
	rebuild(st idem.Store, cfg idem.Config) (target, func(), error)
	// baseConfig and baseStore are what rebuild starts from.
	baseConfig() idem.Config
	newStore() (idem.Store, func())
	// fix gives advice for a check's failure.
	fix(c Check) string
}

// runner runs the checks and reports.
type runner struct {
	t      testing.TB
	tg     target
	n      int
	checks []Check
}

func (r *runner) fail(c Check, format string, a ...any) {
	r.t.Helper()
	r.t.Errorf("idemtest: %s: %s\nfix: %s", c, fmt.Sprintf(format, a...), r.tg.fix(c))
}

// newKey returns a fresh key for one check, unique across runs so a store
// or handler reused between tests never sees it twice.
func newKey(c Check) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "idemtest-" + string(c) + "-" + hex.EncodeToString(b)
}

func (r *runner) run() {
	r.t.Helper()
	if _, ok := r.tg.effects(); !ok {
		r.t.Logf("idemtest: no Effects function: effect counts are not checked, only answers")
	}
	for _, c := range r.checks {
		if !r.tg.deep() && !slices.Contains(outsideChecks, c) {
			r.t.Logf("idemtest: %s: skipped: the handler is not a *idemtest.Built, so idemtest cannot give it a faulty store or a fake clock", c)
			continue
		}
		switch c {
		case Replay:
			r.replay()
		case Divergence:
			r.divergence()
		case Concurrency:
			r.concurrency()
		case Crash:
			r.crash()
		case LostAnswers:
			r.lostAnswers()
		case Retention:
			r.retention()
		case Observability:
			r.observability()
		default:
			r.t.Errorf("idemtest: unknown check %q", c)
		}
	}
}

// count returns the effects so far on tg (0 when uncounted).
func count(tg target) int { n, _ := tg.effects(); return n }

// wantEffects fails c when the effects counted since before are not want.
func (r *runner) wantEffects(c Check, tg target, before, want int, what string) bool {
	r.t.Helper()
	n, ok := tg.effects()
	if !ok || n-before == want {
		return true
	}
	r.fail(c, "%s\n  the effect ran %d time(s) (Effects went %d → %d); want exactly %d", what, n-before, before, n, want)
	return false
}

func (r *runner) replay() {
	r.t.Helper()
	key := newKey(Replay)
	before := count(r.tg)
	a := r.tg.send(key, original)
	if !a.ok() {
		r.fail(Replay, "sent %s\n  got %s\n  want a successful answer: the checks need a request that succeeds", r.tg.describe(key, original), a)
		return
	}
	b := r.tg.send(key, original)
	sent := "sent " + r.tg.describe(key, original) + " twice"
	if !b.same(a) {
		r.fail(Replay, "%s\n  first:  %s\n  second: %s\n  want the second answer identical to the first (status, body, recorded headers)", sent, a, b)
	}
	r.wantEffects(Replay, r.tg, before, 1, sent)
}

func (r *runner) divergence() {
	r.t.Helper()
	key := newKey(Divergence)
	before := count(r.tg)
	a := r.tg.send(key, original)
	if !a.ok() {
		r.fail(Divergence, "sent %s\n  got %s\n  want a successful answer", r.tg.describe(key, original), a)
		return
	}
	b := r.tg.send(key, changed)
	sent := fmt.Sprintf("sent %s, then %s", r.tg.describe(key, original), r.tg.describe(key, changed))
	if !b.mismatch() {
		r.fail(Divergence, "%s\n  second got %s\n  want a refusal (HTTP 422 key-mismatch, idem.ErrMismatch): the recorded answer of one request was served for another", sent, b)
	}
	r.wantEffects(Divergence, r.tg, before, 1, sent)
	if !r.tg.canReorder() {
		return
	}
	key = newKey(Divergence)
	before = count(r.tg)
	a = r.tg.send(key, original)
	b = r.tg.send(key, reordered)
	sent = fmt.Sprintf("sent %s, then %s", r.tg.describe(key, original), r.tg.describe(key, reordered))
	if !a.ok() || !b.same(a) {
		r.fail(Divergence, "%s\n  first:  %s\n  second: %s\n  want a replay: the same JSON document with its members reordered is the same request (hash its canonical form, idem.FingerprintBody)", sent, a, b)
	}
	r.wantEffects(Divergence, r.tg, before, 1, sent)
}

func (r *runner) concurrency() {
	r.t.Helper()
	key := newKey(Concurrency)
	before := count(r.tg)
	answers := make([]answer, r.n)
	burst.Run(r.n, func(i int) { answers[i] = r.tg.send(key, original) })
	sent := fmt.Sprintf("sent %s %d times at once", r.tg.describe(key, original), r.n)
	var first answer
	for _, a := range answers {
		if a.ok() {
			first = a
			break
		}
	}
	if first == nil {
		r.fail(Concurrency, "%s\n  got no successful answer; first: %s\n  want one request to run and the others to replay or be refused as in flight", sent, answers[0])
		return
	}
	for i, a := range answers {
		if a.ok() && !a.same(first) || !a.ok() && !a.inFlight() {
			r.fail(Concurrency, "%s\n  answer %d: %s\n  answer with the effect: %s\n  want every answer identical to the recorded one, or an in-flight refusal (HTTP 409 with Retry-After, idem.ErrInFlight)", sent, i, a, first)
			break
		}
	}
	r.wantEffects(Concurrency, r.tg, before, 1, sent)
}

// crashPhases are the points at which the crash check kills the process.
var crashPhases = []storetest.Phase{storetest.AfterClaim, storetest.DuringEffect, storetest.AfterEffect, storetest.AfterRecord}

// deadTarget builds the target of a process that dies at ph, over st.
func (r *runner) deadTarget(ph storetest.Phase, st idem.Store, cfg idem.Config) (target, *storetest.PhaseStore, func(), error) {
	ps := storetest.NewPhaseStore(st, ph)
	dcfg := cfg
	dcfg.FinishTimeout = 50 * time.Millisecond // a dead process stops trying soon
	dcfg.StoreRetries = 0
	dcfg.Spool = nil
	dcfg.ReplayCache = idem.ReplayCacheConfig{MaxBytes: -1}
	dead, closeDead, err := r.tg.rebuild(ps, dcfg)
	return dead, ps, closeDead, err
}

// testConfig is the target's configuration on a fake clock, observed by obs.
func (r *runner) testConfig(clock *storetest.Clock, obs *observer) idem.Config {
	cfg := r.tg.baseConfig()
	cfg.Clock = clock.Now
	cfg.Spool = nil
	if cfg.Observer != nil {
		cfg.Observer = idem.Observers(cfg.Observer, obs)
	} else {
		cfg.Observer = obs
	}
	return cfg
}

func (r *runner) crash() {
	r.t.Helper()
	for _, ph := range crashPhases {
		r.crashAt(ph, Crash, nil)
	}
}

// crashAt kills a process at ph, restarts it past the lease and sends a
// duplicate; it returns the duplicate's answer (nil when it could not run).
func (r *runner) crashAt(ph storetest.Phase, c Check, obs *observer) answer {
	r.t.Helper()
	clock := storetest.NewClock()
	if obs == nil {
		obs = &observer{}
	}
	cfg := r.testConfig(clock, obs)
	st, closeSt := r.tg.newStore()
	defer closeSt()
	dead, _, closeDead, err := r.deadTarget(ph, st, cfg)
	if err != nil {
		r.t.Errorf("idemtest: %s: building the handler: %v", c, err)
		return nil
	}
	key := newKey(c)
	before := count(dead)
	first := dead.send(key, original)
	closeDead()
	clock.Advance(leaseOf(cfg) + time.Second)
	live, closeLive, err := r.tg.rebuild(st, cfg)
	if err != nil {
		r.t.Errorf("idemtest: %s: building the handler: %v", c, err)
		return nil
	}
	defer closeLive()
	ran := count(live) - before
	dup := live.send(key, original)
	sent := fmt.Sprintf("sent %s; the process died %s (it answered %s); after the lease a restarted process got the same request", dead.describe(key, original), ph, first)
	after := count(live) - before
	if c != Crash {
		return dup
	}
	switch ph {
	case storetest.AfterRecord:
		if !dup.ok() || first.ok() && !dup.same(first) {
			r.fail(c, "%s\n  got %s\n  want the recorded answer replayed: the outcome reached the store", sent, dup)
		}
	default:
		if !dup.unknown() {
			r.fail(c, "%s\n  got %s\n  want unknown (HTTP 409 outcome-unknown, idem.ErrUnknownOutcome): the effect may have run, so it must not run again until the record is resolved", sent, dup)
		}
	}
	if _, ok := live.effects(); ok && after != ran {
		r.fail(c, "%s\n  the duplicate ran the effect again (%d effect(s) before it, %d after); want no re-run", sent, ran, after)
	}
	return dup
}

func leaseOf(cfg idem.Config) time.Duration {
	if cfg.Lease > 0 {
		return cfg.Lease
	}
	return 30 * time.Second
}

func (r *runner) lostAnswers() {
	r.t.Helper()
	clock := storetest.NewClock()
	cfg := r.testConfig(clock, &observer{})
	st, closeSt := r.tg.newStore()
	defer closeSt()
	lossy := storetest.NewLossyStore(&failOnce{Store: st, ops: map[string]bool{"claim": true}}, map[string]int{"claim": 1, "finish": 1})
	tg, closeTg, err := r.tg.rebuild(lossy, cfg)
	if err != nil {
		r.t.Errorf("idemtest: %s: building the handler: %v", LostAnswers, err)
		return
	}
	defer closeTg()
	key := newKey(LostAnswers)
	before := count(tg)
	a := tg.send(key, original)
	b := tg.send(key, original)
	sent := fmt.Sprintf("sent %s twice; the store failed the first claim, then lost the answers of the claim and of the outcome after applying them", tg.describe(key, original))
	if !a.ok() || !b.same(a) {
		r.fail(LostAnswers, "%s\n  first:  %s\n  second: %s\n  want one successful answer replayed identically", sent, a, b)
	}
	r.wantEffects(LostAnswers, tg, before, 1, sent)
}

func (r *runner) retention() {
	r.t.Helper()
	clock := storetest.NewClock()
	cfg := r.testConfig(clock, &observer{})
	ttl := cfg.TTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	st, closeSt := r.tg.newStore()
	defer closeSt()
	tg, closeTg, err := r.tg.rebuild(st, cfg)
	if err != nil {
		r.t.Errorf("idemtest: %s: building the handler: %v", Retention, err)
		return
	}
	defer closeTg()
	key := newKey(Retention)
	before := count(tg)
	a := tg.send(key, original)
	clock.Advance(ttl - time.Second)
	b := tg.send(key, original)
	sent := fmt.Sprintf("sent %s, then again %v later (TTL %v)", tg.describe(key, original), ttl-time.Second, ttl)
	if !a.ok() || !b.same(a) {
		r.fail(Retention, "%s\n  first:  %s\n  second: %s\n  want a replay until the TTL has passed", sent, a, b)
	}
	r.wantEffects(Retention, tg, before, 1, sent)
	clock.Advance(2 * time.Second)
	c := tg.send(key, original)
	sent = fmt.Sprintf("sent %s, then again %v later (TTL %v)", tg.describe(key, original), ttl+time.Second, ttl)
	if !c.ok() {
		r.fail(Retention, "%s\n  got %s\n  want a new intent: after the TTL the key is free", sent, c)
	}
	r.wantEffects(Retention, tg, before, 2, sent)
}

func (r *runner) observability() {
	r.t.Helper()
	clock := storetest.NewClock()
	obs := &observer{}
	cfg := r.testConfig(clock, obs)
	st, closeSt := r.tg.newStore()
	defer closeSt()
	tg, closeTg, err := r.tg.rebuild(st, cfg)
	if err != nil {
		r.t.Errorf("idemtest: %s: building the handler: %v", Observability, err)
		return
	}
	defer closeTg()
	key := newKey(Observability)
	tg.send(key, original)
	tg.send(key, original)
	tg.send(key, changed)
	want := []idem.Outcome{idem.OutcomeFirst, idem.OutcomeReplay, idem.OutcomeMismatch}
	got := obs.outcomes(key)
	if !slices.Equal(got, want) {
		why := "the outcomes differ from the engine's for a correct handler; see the replay and divergence checks"
		if len(got) == 0 {
			why = "none reached the engine idemtest built"
		}
		r.fail(Observability, "sent %s twice, then %s\n  the observer saw outcomes %v (%s)\n  want %v", tg.describe(key, original), tg.describe(key, changed), got, why, want)
	}
	uobs := &observer{}
	r.crashAt(storetest.DuringEffect, Observability, uobs)
	if !slices.Contains(uobs.all(), idem.OutcomeUnknown) {
		r.fail(Observability, "the process died during the effect; a duplicate after the lease was answered\n  the observer saw outcomes %v\n  want one of them %q", uobs.all(), idem.OutcomeUnknown)
	}
}

// observer records the outcomes the engine reports, per key.
type observer struct {
	mu     sync.Mutex
	events []idem.Event
}

// Observe implements idem.Observer.
func (o *observer) Observe(_ context.Context, ev idem.Event) {
	if ev.Kind != idem.EventOutcome {
		return
	}
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
}

func (o *observer) outcomes(key string) []idem.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []idem.Outcome
	for _, ev := range o.events {
		if ev.Key == key {
			out = append(out, ev.Outcome)
		}
	}
	return out
}

func (o *observer) all() []idem.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]idem.Outcome, 0, len(o.events))
	for _, ev := range o.events {
		out = append(out, ev.Outcome)
	}
	return out
}

// checksOf returns the checks to run: only, or all of them.
func checksOf(only []Check) []Check {
	if len(only) > 0 {
		return only
	}
	return AllChecks
}
