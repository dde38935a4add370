package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// The world's fixed parameters. Lease and the effect timeout are long in
// wall time on purpose: the engine's heartbeat schedule and effect timeout
// run on the wall clock (they are timers), and a world must never reach
// them, or its history would depend on timing. A run lasts seconds of wall
// time; the engine's first background beat would come after 20 minutes.
// On the simulated clock an hour-long lease is as good as a 30-second one:
// effects, outages and retries are scaled to it.
const (
	lease         = time.Hour
	ttl           = 4 * time.Hour
	retryWindow   = 2 * time.Hour // the longest client retry chain (Config.Cover)
	effectTimeout = 24 * time.Hour
	finishTimeout = time.Hour
	maxAttempts   = 16
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Control disables one guard of the store, for the control runs that show
// the checker catches what the guard prevents.
type Control int

// The controls.
const (
	// ControlNone: the store as it is.
	ControlNone Control = iota
	// ControlNoUniqueClaim: a claim of a key held in progress succeeds
	// anyway (a check-then-insert claim that lost the race).
	ControlNoUniqueClaim
	// ControlNoFence: outcome writes, releases and heartbeats ignore the
	// fence and attempt id (they apply to whatever attempt holds the key).
	ControlNoFence
	// ControlNoFingerprint: the claim reports the existing record with the
	// caller's fingerprint, so the engine's fingerprint check never fires.
	ControlNoFingerprint
	// ControlGlobalScope: the store drops the scope (one namespace).
	ControlGlobalScope
)

func (c Control) String() string {
	switch c {
	case ControlNone:
		return "none"
	case ControlNoUniqueClaim:
		return "no-unique-claim"
	case ControlNoFence:
		return "no-fence"
	case ControlNoFingerprint:
		return "no-fingerprint"
	case ControlGlobalScope:
		return "global-scope"
	}
	return fmt.Sprintf("control(%d)", int(c))
}

// Config describes one world. Everything in its history follows from it.
type Config struct {
	// Seed decides the plan (intents, clients, faults) and every decision
	// made while it runs.
	Seed uint64
	// Intents is how many intents the world's clients run. Default 1500.
	Intents int
	// Procs is how many engine processes share the store. Default 3.
	Procs int
	// Faults turns on the faults: lost answers and resets (PLose, PReset),
	// process kills, store restarts. Operator resolutions and sweeps run
	// always.
	Faults bool
	// PReset is the chance a store call is reset before it reaches the
	// store; PLose that its answer is lost after the store applied it.
	PReset, PLose float64
	// Control disables a guard (control runs).
	Control Control
	// NewStore returns the store the world runs on, and a function that
	// closes it. Default: a fresh memstore.
	NewStore func() (idem.Store, func(), error)
	// Keep, when set, runs only part of the plan (for shrinking).
	Keep *Keep
}

// Keep selects part of a plan: the intents and faults whose ids it
// lists. A nil set keeps all.
type Keep struct {
	Intents map[int]bool
	Faults  map[int]bool
}

func (c *Config) fill() {
	if c.Intents == 0 {
		c.Intents = 1500
	}
	if c.Procs == 0 {
		c.Procs = 3
	}
	if c.NewStore == nil {
		c.NewStore = func() (idem.Store, func(), error) {
			st := memstore.New()
			return st, func() { _ = st.Close() }, nil
		}
	}
}

// Default returns the configuration of the seed set's worlds.
func Default(seed uint64) Config {
	return Config{Seed: seed, Faults: true, PReset: 0.004, PLose: 0.006}
}

type skey struct{ scope, key string }

// intent is one logical business action and everything the world knows
// about it: what the provider applied for it, the faults that touched it.
type intent struct {
	id         int
	scope, key string
	body       string
	arrive     time.Time
	dups       int // concurrent duplicates of the first request
	bug        bool
	long       bool // a long effect that heartbeats its lease
	rng        *rand.Rand

	effects  []effect // what the provider applied for (scope, key)
	pending  int      // attempts in their effect that have not yet called the provider
	faulted  []string // faults that may make the outcome unknowable
	swept    bool
	declines int
}

// effect is one application at the provider.
type effect struct {
	call  int
	value string
}

// proc is one engine process.
type proc struct {
	id    int
	eng   *idem.Engine
	conn  *conn
	alive bool
	tasks []*task // tasks running in it
}

// client sends one request (a body under the intent's key) until it gets
// a complete answer, a definite refusal it should not retry, or its
// retry window closes.
type client struct {
	id       int
	in       *intent
	body     string
	attempts int
	until    time.Time
	stopped  bool
}

// call is one request of a client.
type call struct {
	id      int
	cl      *client
	proc    *proc
	start   time.Time
	done    bool
	gaveUp  bool
	cancel  context.CancelFunc
	effects int // effects this call's handler applied
}

// taskCtx is a task's state the store connection reads.
type taskCtx struct {
	in          *intent
	call        *call // nil for an operator's task
	claimFailed int   // the intent whose claim just failed (see conn.call), or -1
	mayHold     bool  // a claim of this task was applied
}

type faultCounts struct {
	reset, lost, refused, restartLost int
	kills, restarts, storeRestarts    int
	providerTimeouts, slowEffects     int
	resolutions, sweeps, swept        int
	unfenced                          int // ControlNoFence: stale writes let through
	crashPoints                       int // kills at an exact phase
	// killPhase counts the calls a kill cut off, by phase.
	killPhase map[string]int
}

type world struct {
	cfg     Config
	sched   *sched
	store   idem.Store
	procs   []*proc
	intents []*intent
	byKey   map[skey]*intent
	// byStore maps the (scope, key) the store holds to its intents (more
	// than one under ControlGlobalScope).
	byStore map[skey][]*intent
	leases  map[string]time.Time // attempt id → lease as last written

	storeEpoch     int
	storeHangUntil time.Time // the store applies calls but answers none until then
	storeDownUntil time.Time

	faults          faultCounts
	backgroundBeats int
	hist            []Op
	calls, clients  int
	errs            []error // the world could not run as planned
	worldViolations []Violation
}

func (w *world) curCtx() *taskCtx {
	if w.sched.cur == nil {
		return nil
	}
	ct, _ := w.sched.cur.data.(*taskCtx)
	return ct
}

func (w *world) intentOf(scope, key string) *intent { return w.byKey[skey{scope, key}] }

// storeScope is the scope the store is asked for.
func (w *world) storeScope(scope string) string {
	if w.cfg.Control == ControlGlobalScope {
		return ""
	}
	return scope
}

// latency is a network hop: mostly sub-millisecond to a few ms, sometimes
// far longer.
func (w *world) latency(r *rand.Rand) time.Duration {
	if r.IntN(100) == 0 {
		return time.Duration(50+r.IntN(450)) * time.Millisecond
	}
	return time.Duration(100+r.IntN(4900)) * time.Microsecond
}

func (w *world) record(op Op) {
	op.T = w.sched.Now().Sub(epoch)
	w.hist = append(w.hist, op)
}

func (w *world) fault(in *intent, what string) {
	in.faulted = append(in.faulted, what)
	w.record(Op{Kind: KindFault, Intent: in.id, Call: -1, Detail: what})
}

func (w *world) engineConfig() idem.Config {
	return idem.Config{
		TTL: ttl, Cover: map[string]time.Duration{"client retry chain": retryWindow},
		Lease: lease, InFlight: idem.InFlightReject,
		EffectTimeout: effectTimeout, FinishTimeout: finishTimeout,
		Clock: w.sched.Now, ClockSync: -1,
		ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, MaxAge: 1000 * time.Hour},
	}
}

func (w *world) startProc(p *proc) error {
	p.conn = &conn{w: w, p: p, st: w.store}
	e, err := idem.New(p.conn, w.engineConfig())
	if err != nil {
		return err
	}
	p.eng, p.alive, p.tasks = e, true, nil
	return nil
}

// kill makes p die: every task in it runs to its end with its store calls
// failing (the answers of calls in flight are lost), then the engine is
// closed. The store keeps what it applied.
func (w *world) kill(p *proc, why string) {
	if !p.alive {
		return
	}
	p.alive = false
	p.conn.dead = true
	w.faults.kills++
	tasks := p.tasks
	p.tasks = nil
	for _, tk := range tasks {
		if tk.done {
			continue
		}
		ct := tk.data.(*taskCtx)
		if ct.in != nil && ct.mayHold {
			w.fault(ct.in, fmt.Sprintf("process %d killed (%s) at %q", p.id, why, tk.parkedAt))
			if ct.call != nil {
				w.faults.killPhase[phaseOf(tk.parkedAt)]++
			}
		}
		w.sched.kill(tk)
	}
	_ = p.eng.Close()
}

// The phases of claim → effect → record a kill can cut a call off at.
const (
	PhaseAfterClaim   = "after the claim"
	PhaseDuringEffect = "during the effect"
	PhaseAfterEffect  = "after the effect, before the record"
	PhaseAfterRecord  = "after the record"
	PhaseOther        = "elsewhere (a heartbeat, a read)"
)

// Phases lists the phases in order.
var Phases = []string{PhaseAfterClaim, PhaseDuringEffect, PhaseAfterEffect, PhaseAfterRecord, PhaseOther}

func phaseOf(parkedAt string) string {
	switch {
	case parkedAt == "claim answered":
		return PhaseAfterClaim
	case strings.HasPrefix(parkedAt, "effect step"):
		return PhaseDuringEffect
	case parkedAt == "after the effect", parkedAt == "finish sent", parkedAt == "release sent", parkedAt == "finish refused":
		return PhaseAfterEffect
	case parkedAt == "finish answered", parkedAt == "release answered":
		return PhaseAfterRecord
	}
	return PhaseOther
}

// killFor kills p and restarts it d later.
func (w *world) killFor(p *proc, why string, d time.Duration) {
	if !p.alive {
		return
	}
	w.record(Op{Kind: KindFault, Intent: -1, Call: -1, Detail: fmt.Sprintf("%s: kill process %d for %s", why, p.id, d)})
	w.kill(p, why)
	w.sched.after(d, func() {
		if err := w.startProc(p); err != nil {
			w.errs = append(w.errs, err)
			return
		}
		w.faults.restarts++
		w.record(Op{Kind: KindFault, Intent: -1, Call: -1, Detail: fmt.Sprintf("process %d restarted", p.id)})
	})
}

// crashHere kills the current task's process at the point where it is
// about to park (the next event, before its wake-up): a crash at an
// exact phase of claim → effect → record.
func (w *world) crashHere(p *proc, in *intent, where string) {
	w.faults.crashPoints++
	d := time.Duration(1+in.rng.IntN(30)) * time.Second
	w.sched.after(0, func() { w.killFor(p, fmt.Sprintf("crash point %q of intent %d", where, in.id), d) })
}

// Run runs one world and checks its history.
func Run(cfg Config) *Result {
	cfg.fill()
	pl := makePlan(cfg)
	st, closeStore, err := cfg.NewStore()
	if err != nil {
		return &Result{Config: cfg, Err: err}
	}
	defer closeStore()
	w := &world{cfg: cfg, sched: newSched(epoch), store: st, faults: faultCounts{killPhase: map[string]int{}}, byKey: map[skey]*intent{}, byStore: map[skey][]*intent{}, leases: map[string]time.Time{}}
	for i := range cfg.Procs {
		p := &proc{id: i}
		if err := w.startProc(p); err != nil {
			return &Result{Config: cfg, Err: err}
		}
		w.procs = append(w.procs, p)
	}
	for _, ip := range pl.intents {
		if cfg.Keep != nil && cfg.Keep.Intents != nil && !cfg.Keep.Intents[ip.id] {
			continue
		}
		in := &intent{id: ip.id, scope: ip.scope, key: ip.key, body: ip.body, arrive: ip.arrive, dups: ip.dups, bug: ip.bug, long: ip.long,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(ip.id)+1))}
		w.intents = append(w.intents, in)
		w.byKey[skey{in.scope, in.key}] = in
		sk := skey{w.storeScope(in.scope), in.key}
		w.byStore[sk] = append(w.byStore[sk], in)
		w.sched.at(in.arrive, func() { w.arrive(in) })
	}
	for _, f := range pl.faults {
		if cfg.Keep != nil && cfg.Keep.Faults != nil && !cfg.Keep.Faults[f.id] {
			continue
		}
		w.sched.at(f.at, func() { w.inject(f) })
	}
	w.sched.run(time.Time{})
	for _, p := range w.procs {
		if p.alive {
			_ = p.eng.Close()
		}
	}
	res := w.check()
	res.Config = cfg
	res.Plan = pl
	return res
}

// arrive starts an intent's clients: the first request, its concurrent
// duplicates, and a buggy client reusing the key with another body.
func (w *world) arrive(in *intent) {
	r := in.rng
	w.newClient(in, in.body, 0)
	for range in.dups {
		w.newClient(in, in.body, time.Duration(r.IntN(2000))*time.Millisecond)
	}
	if in.bug {
		w.newClient(in, in.body+"&changed=1", time.Duration(r.IntN(60))*time.Second)
	}
}

func (w *world) newClient(in *intent, body string, after time.Duration) {
	cl := &client{id: w.clients, in: in, body: body, until: in.arrive.Add(retryWindow)}
	w.clients++
	w.sched.after(after, func() { w.send(cl) })
}

// retry schedules the client's next attempt after a capped, jittered
// exponential backoff, inside its retry window.
func (w *world) retry(cl *client) {
	if cl.stopped {
		return
	}
	if cl.attempts >= maxAttempts {
		cl.stopped = true
		return
	}
	r := cl.in.rng
	base := time.Second << min(2*cl.attempts, 10) // 1s, 4s, 16s, … capped at ~17m
	d := base/2 + time.Duration(r.Int64N(int64(base)))
	if !w.sched.Now().Add(d).Before(cl.until) {
		cl.stopped = true
		return
	}
	w.sched.after(d, func() { w.send(cl) })
}

// send starts one call of cl on a process the load balancer picks.
func (w *world) send(cl *client) {
	if cl.stopped {
		return
	}
	in, r := cl.in, cl.in.rng
	cl.attempts++
	c := &call{id: w.calls, cl: cl, start: w.sched.Now()}
	w.calls++
	w.record(Op{Kind: KindInvoke, Intent: in.id, Call: c.id, Client: cl.id, Body: cl.body})
	var up []*proc
	for _, p := range w.procs {
		if p.alive {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		w.record(Op{Kind: KindFail, Intent: in.id, Call: c.id, Client: cl.id, Body: cl.body, Detail: "no process up (connection refused)"})
		c.done = true
		w.retry(cl)
		return
	}
	p := up[r.IntN(len(up))]
	c.proc = p
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	timeout := 30 * time.Second
	if r.IntN(20) == 0 {
		timeout = time.Duration(1+r.IntN(300)) * time.Millisecond // an impatient client
	}
	req := idem.Request{Scope: in.scope, Key: idem.Key(in.key), Fingerprint: idem.NewFingerprint([]byte(cl.body)), Operation: "charge"}
	ct := &taskCtx{in: in, call: c, claimFailed: -1}
	tk := w.sched.spawn(w.sched.Now(), ct, func(tk *task) {
		res, err := p.eng.DoBytes(ctx, req, w.effect(tk, c))
		w.answer(c, tk, res, err)
	})
	p.tasks = append(p.tasks, tk)
	w.sched.after(timeout, func() {
		if c.done || c.gaveUp {
			return
		}
		c.gaveUp = true
		cancel()
		w.record(Op{Kind: KindIndeterminate, Intent: in.id, Call: c.id, Client: cl.id, Body: cl.body, Detail: fmt.Sprintf("client timeout after %s", timeout)})
		w.retry(cl)
	})
}

// answer records what call c's client saw and decides its next step. It
// runs on the call's task.
func (w *world) answer(c *call, tk *task, res idem.Result, err error) {
	c.done = true
	c.cancel()
	cl, in := c.cl, c.cl.in
	op := Op{Intent: in.id, Call: c.id, Client: cl.id, Body: cl.body}
	if c.gaveUp {
		// The client stopped listening; the answer goes nowhere, but the
		// history says what the engine made of the call.
		op.Kind, op.Effects = KindLate, c.effects
		switch {
		case tk.killed:
			op.Detail = "the process died"
		case err != nil:
			op.Detail = errClass(err)
		default:
			op.Detail = "succeeded " + string(res.Value)
		}
		w.record(op)
		return
	}
	var fe *idem.FailureError
	switch {
	case tk.killed:
		op.Kind, op.Detail = KindIndeterminate, "process died with the call in flight"
	case err == nil:
		op.Kind, op.State, op.Value, op.Replayed = KindOK, idem.StateSucceeded, string(res.Value), res.Replayed
	case errors.As(err, &fe):
		op.Kind, op.State, op.Value, op.Replayed = KindOK, idem.StateFailed, fe.Message, fe.Replayed
	case errors.Is(err, idem.ErrMismatch):
		op.Kind, op.Detail = KindFail, "mismatch"
	case errors.Is(err, idem.ErrInFlight):
		op.Kind, op.Detail = KindFail, "in flight"
	case errors.Is(err, idem.ErrReleased):
		op.Kind, op.Detail = KindFail, "released: "+err.Error()
	case errors.Is(err, idem.ErrUnknownOutcome):
		op.Kind, op.Detail = KindIndeterminate, "outcome unknown"
	case errors.Is(err, idem.ErrFenced):
		op.Kind, op.Detail = KindIndeterminate, "fenced"
	case errors.Is(err, idem.ErrStoreUnavailable):
		op.Kind, op.Detail = KindFail, "store unavailable: "+err.Error()
	default:
		op.Kind, op.Detail = KindIndeterminate, "unexpected error: "+err.Error()
		w.worldViolations = append(w.worldViolations, Violation{Intent: in.id, Rule: "unexpected-error", Detail: err.Error()})
	}
	op.Effects = c.effects
	w.record(op)
	switch {
	case op.Kind == KindOK:
		cl.stopped = true
	case op.Kind == KindFail && op.Detail == "mismatch":
		cl.stopped = true // a client bug: retrying cannot help
	default:
		w.retry(cl)
	}
}

// errClass names an engine error by its class, in the same words
// whatever the store's own message.
func errClass(err error) string {
	var fe *idem.FailureError
	switch {
	case errors.As(err, &fe):
		return "recorded failure " + fe.Message
	case errors.Is(err, idem.ErrMismatch):
		return "mismatch"
	case errors.Is(err, idem.ErrInFlight):
		return "in flight"
	case errors.Is(err, idem.ErrReleased):
		return "released"
	case errors.Is(err, idem.ErrUnknownOutcome):
		return "outcome unknown"
	case errors.Is(err, idem.ErrFenced):
		return "fenced"
	case errors.Is(err, idem.ErrClosed):
		return "closed"
	case errors.Is(err, idem.ErrStoreUnavailable):
		return "store unavailable: " + err.Error()
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return err.Error()
}

// Provider outcomes, by chance of an effect reaching the provider.
const (
	pDecline = 0.03 // refused by the provider: no effect, a recorded failure
	pRelease = 0.02 // rate-limited: no effect, the claim is released
	pTimeout = 0.03 // the provider does not answer in time: applied or not, nobody knows yet
	pSlow    = 0.02 // an effect step outlives the lease (no heartbeat comes in time)
	// pSlowAfter is pSlow for the step after the provider call, where a
	// stale attempt that writes late is what the fence must refuse.
	pSlowAfter = 0.05
)

var errKilled = errors.New("sim: the process died")

// reconciled ends the result an operator records from the provider's
// view: the same effect, told by the provider rather than by the handler.
const reconciled = "#reconciled"

// effect is the simulated effect of call c: a few steps of work (each a
// park of simulated time, some with a heartbeat), then one call to the
// provider, then a last step before the outcome goes back to the engine.
// A kill at any park ends it as a dead process would end.
func (w *world) effect(tk *task, c *call) idem.Handler {
	return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		in := c.cl.in
		r := in.rng
		in.pending++
		called := false
		defer func() {
			if !called {
				in.pending--
			}
		}()
		overrun := false
		step := func(where string, d time.Duration) bool {
			// Nothing extends the lease while the effect is parked (the
			// simulated effect sends its heartbeats itself), so a step that
			// ends past the lease outlives it, at the lease's end: that is
			// when the fault happens and is recorded.
			if until := w.leases[a.ID]; !overrun && !w.sched.Now().Add(d).Before(until) {
				overrun = true
				w.sched.at(until, func() {
					w.fault(in, fmt.Sprintf("attempt of call %d outlived its lease at %q", c.id, where))
				})
			}
			return tk.park(where, d)
		}
		duration := func(pSlow float64) time.Duration {
			switch {
			case r.Float64() < pSlow:
				w.faults.slowEffects++
				return lease + time.Duration(r.Int64N(int64(lease)))
			case in.long:
				return time.Duration(5+r.IntN(25)) * time.Minute
			}
			return time.Duration(10+r.IntN(2000)) * time.Millisecond
		}
		steps := 1 + r.IntN(3)
		if in.long {
			steps = 2 + r.IntN(5)
		}
		for i := range steps {
			if !step(fmt.Sprintf("effect step %d", i+1), duration(pSlow)) {
				return nil, idem.Unknown(errKilled)
			}
			if in.long || r.IntN(3) == 0 {
				_ = a.Heartbeat(context.WithValue(ctx, beatMarker{}, true))
			}
		}
		// The provider call.
		in.pending--
		called = true
		var val []byte
		var herr error
		x := r.Float64()
		n := len(w.hist)
		switch {
		case x < pDecline:
			in.declines++
			herr = fmt.Errorf("declined|%s|%s|%s|%d", in.scope, in.key, c.cl.body, n)
		case x < pDecline+pRelease:
			herr = idem.Release(errors.New("provider rate-limited: not applied"))
		case x < pDecline+pRelease+pTimeout:
			w.faults.providerTimeouts++
			applied := r.IntN(2) == 0
			if applied {
				w.applyEffect(in, c, fmt.Sprintf("ok|%s|%s|%s|%d", in.scope, in.key, c.cl.body, n))
			}
			w.fault(in, fmt.Sprintf("provider timed out for call %d (applied: %v, learnt later)", c.id, applied))
			herr = idem.Unknown(context.DeadlineExceeded)
		default:
			val = []byte(fmt.Sprintf("ok|%s|%s|%s|%d", in.scope, in.key, c.cl.body, n))
			w.applyEffect(in, c, string(val))
		}
		if !step("after the effect", duration(pSlowAfter)) {
			return nil, idem.Unknown(errKilled)
		}
		return val, herr
	}
}

func (w *world) applyEffect(in *intent, c *call, v string) {
	in.effects = append(in.effects, effect{call: c.id, value: v})
	c.effects++
	w.record(Op{Kind: KindEffect, Intent: in.id, Call: c.id, Client: c.cl.id, Body: c.cl.body, Value: v})
}

// fault kinds of a plan.
const (
	faultKill = iota
	faultStoreRestart
	faultOperator
	faultSweep
)

// inject applies a planned fault or periodic job.
func (w *world) inject(f plannedFault) {
	switch f.kind {
	case faultKill:
		p := w.procs[f.proc%len(w.procs)]
		if !p.alive {
			return
		}
		w.killFor(p, fmt.Sprintf("fault %d", f.id), f.dur)
	case faultStoreRestart:
		// The store hangs for a moment (it applies what arrives, answers
		// nothing), then restarts: every answer still on its way is lost,
		// and it refuses connections for f.dur. Its data stays.
		w.faults.storeRestarts++
		hang := f.dur / 4
		w.storeHangUntil = w.sched.Now().Add(hang)
		w.record(Op{Kind: KindFault, Intent: -1, Call: -1, Detail: fmt.Sprintf("fault %d: store hangs for %s, then restarts, down for %s", f.id, hang, f.dur)})
		w.sched.after(hang, func() {
			w.storeEpoch++
			w.storeDownUntil = w.sched.Now().Add(f.dur)
		})
	case faultOperator:
		w.operator(f)
	case faultSweep:
		w.sweep()
	}
}

// operator resolves unknown records the way a careful operator does: by
// the provider's truth (applied → succeeded with the provider's result;
// not applied → released), with the fence it read, and only once no
// attempt of the intent can still call the provider (the simulation knows;
// a real operator waits for the lease and the provider's settlement).
func (w *world) operator(f plannedFault) {
	recs, err := w.store.List(context.Background(), idem.ListFilter{States: []idem.State{idem.StateUnknown}})
	if err != nil {
		w.errs = append(w.errs, err)
		return
	}
	var todo []*intent
	var fences []int64
	for _, rec := range recs {
		ins := w.byStore[skey{rec.Scope, rec.Key}]
		if len(ins) == 0 || ins[0].pending > 0 {
			continue
		}
		in := ins[0]
		todo = append(todo, in)
		fences = append(fences, rec.Fence)
	}
	if len(todo) == 0 {
		return
	}
	var up []*proc
	for _, p := range w.procs {
		if p.alive {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		return
	}
	p := up[f.proc%len(up)]
	ct := &taskCtx{claimFailed: -1}
	tk := w.sched.spawn(w.sched.Now(), ct, func(tk *task) {
		for i, in := range todo {
			if tk.killed {
				return
			}
			if in.pending > 0 {
				continue // an attempt started meanwhile: not decidable yet
			}
			ct.in = in
			res := idem.Resolution{Release: true, IfFence: fences[i], Actor: "sim-operator", Reason: "provider has no effect"}
			as := "released"
			if len(in.effects) > 0 {
				v := in.effects[0].value + reconciled
				res = idem.Resolution{As: idem.StateSucceeded, Result: []byte(v), IfFence: fences[i], Actor: "sim-operator", Reason: "provider applied it"}
				as = "succeeded " + v
			}
			_, err := p.eng.Resolve(context.Background(), in.scope, idem.Key(in.key), res)
			w.faults.resolutions++
			d := fmt.Sprintf("operator (fault %d) resolves fence %d as %s: ", f.id, fences[i], as)
			if err != nil {
				d += err.Error()
			} else {
				d += "done"
			}
			w.record(Op{Kind: KindResolve, Intent: in.id, Call: -1, Detail: d})
		}
	})
	p.tasks = append(p.tasks, tk)
}

// sweep runs the sweeper at the world's clock and notes which intents'
// records it may delete (terminal and expired).
func (w *world) sweep() {
	ctx := context.Background()
	now := w.sched.Now()
	recs, err := w.store.List(ctx, idem.ListFilter{States: []idem.State{idem.StateSucceeded, idem.StateFailed}})
	if err != nil {
		w.errs = append(w.errs, err)
		return
	}
	expired := 0
	for _, rec := range recs {
		if rec.Expired(now) {
			expired++
			for _, in := range w.byStore[skey{rec.Scope, rec.Key}] {
				in.swept = true
			}
		}
	}
	n, err := idem.NewSweeper(w.store, idem.SweeperConfig{Clock: w.sched.Now, BatchSize: 100}).RunOnce(ctx)
	if err != nil {
		w.errs = append(w.errs, err)
		return
	}
	w.faults.sweeps++
	w.faults.swept += n
	w.record(Op{Kind: KindSweep, Intent: -1, Call: -1, Detail: fmt.Sprintf("sweep deleted %d records (%d expired)", n, expired)})
	if n != expired {
		w.worldViolations = append(w.worldViolations, Violation{Intent: -1, Rule: "sweep", Detail: fmt.Sprintf("the sweep deleted %d records, %d were expired", n, expired)})
	}
}

// plan is what a seed decides before the world runs.
type plan struct {
	intents []plannedIntent
	faults  []plannedFault
	end     time.Time
}

type plannedIntent struct {
	id         int
	scope, key string
	body       string
	arrive     time.Time
	dups       int
	bug        bool
	long       bool
}

type plannedFault struct {
	id   int
	kind int
	at   time.Time
	proc int
	dur  time.Duration
}

var scopes = []string{"", "tenant-a", "tenant-b", "tenant-c"}

func makePlan(cfg Config) plan {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	var pl plan
	t := epoch
	for id := 0; id < cfg.Intents; {
		t = t.Add(time.Duration(r.ExpFloat64() * float64(8*time.Second)))
		key := fmt.Sprintf("order-%d", id)
		body := fmt.Sprintf("amount=%d", 1+r.IntN(1000))
		n := 1
		if r.IntN(10) < 3 {
			n = 2 // the same key in two scopes
		}
		sc := r.Perm(len(scopes))
		for j := 0; j < n && id < cfg.Intents; j++ {
			b := body
			if j > 0 && r.IntN(2) == 0 {
				b = fmt.Sprintf("amount=%d", 1+r.IntN(1000))
			}
			dups := 0
			switch x := r.IntN(100); {
			case x < 25:
				dups = 1
			case x < 35:
				dups = 2 + r.IntN(3)
			}
			pl.intents = append(pl.intents, plannedIntent{id: id, scope: scopes[sc[j]], key: key, body: b,
				arrive: t.Add(time.Duration(r.IntN(3000)) * time.Millisecond), dups: dups, bug: r.IntN(40) == 0, long: r.IntN(10) == 0})
			id++
		}
	}
	pl.end = t.Add(retryWindow)
	fid := 0
	add := func(kind int, at time.Time, dur time.Duration) {
		pl.faults = append(pl.faults, plannedFault{id: fid, kind: kind, at: at, proc: r.IntN(1 << 20), dur: dur})
		fid++
	}
	for at := epoch.Add(20 * time.Minute); at.Before(pl.end); at = at.Add(time.Duration(15+r.IntN(20)) * time.Minute) {
		add(faultOperator, at, 0)
	}
	// Sweeps go on past the last request until every record recorded has
	// expired, so each world's records meet the sweeper.
	for at := epoch.Add(time.Hour); at.Before(pl.end.Add(ttl)); at = at.Add(time.Duration(90+r.IntN(60)) * time.Minute) {
		add(faultSweep, at, 0)
	}
	if cfg.Faults {
		for at := epoch; ; {
			at = at.Add(time.Duration(r.ExpFloat64() * float64(time.Hour)))
			if !at.Before(pl.end) {
				break
			}
			add(faultKill, at, time.Duration(5+r.IntN(600))*time.Second)
		}
		for at := epoch; ; {
			at = at.Add(time.Duration(r.ExpFloat64() * float64(time.Hour)))
			if !at.Before(pl.end) {
				break
			}
			add(faultStoreRestart, at, time.Duration(1+r.IntN(10))*time.Second)
		}
	}
	slices.SortStableFunc(pl.faults, func(a, b plannedFault) int { return a.at.Compare(b.at) })
	return pl
}
