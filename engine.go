package idem

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Engine runs intents: claim → effect → record outcome → return. A
// duplicate gets the recorded outcome and is told it was a replay. An Engine
// is safe for concurrent use.
type Engine struct {
	store Store
	cfg   Config

	closed    atomic.Bool
	flights   flightGroup
	cache     *replayCache
	beats     beatSchedule
	finTimers finishTimers // ends finishing contexts at their deadlines
	// cacheOnFinish is set when the replay cache also takes each outcome
	// this engine records, not only the records its replays read
	// (ReplayCacheConfig.CacheRecorded, over a store across a network):
	// the first retry then needs no round trip, at the price of a cache
	// insert on every first-time request and MaxBytes of recent outcomes
	// held. A process-local store answers a replay from its own memory, so
	// there the cache always fills from replays alone.
	cacheOnFinish bool
	// observe is false when Config.Observer is the default no-op: events
	// are then neither built nor timed.
	observe bool
	// txBound engines (from WithStore) run on a caller's transaction, which
	// must not be used from a second goroutine: no background heartbeats.
	txBound bool
	// wallClock is true when Config.Clock was left to its default,
	// time.Now: one reading of the wall clock then serves as both the
	// engine clock and the wall-clock deadline of the same moment.
	wallClock bool
	// stopSpool ends the loop that re-applies spooled outcomes;
	// spoolDone is closed when it has.
	stopSpool context.CancelFunc
	spoolDone chan struct{}
	// sync holds the offset to the store's clock (see clock.go).
	sync *clockSync
	// abandoning counts the background clean-ups of claims whose answer
	// was lost while the store did not answer (see abandonClaim); Close
	// ends them (stopAbandon) and waits.
	abandoning sync.WaitGroup
	// replStop ends the replication watch (nil when there is none) and
	// replDone is closed when it has ended.
	replStop    func()
	replDone    chan struct{}
	abandonCtx  context.Context
	stopAbandon context.CancelFunc
}

// New returns an engine over store. It is [NewContext] with a context that
// ends after [StartTimeout].
func New(store Store, cfg Config) (*Engine, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	return NewContext(ctx, store, cfg)
}

// StartTimeout bounds the questions [New] asks the store.
const StartTimeout = 10 * time.Second

// NewContext returns an engine over store. It fails when the configuration
// is invalid, including a TTL shorter than a window it must cover
// ([ErrRetentionTooShort]), and when the store can forget recorded
// outcomes ([ErrVolatileStore], see [DurabilityChecker]) unless
// Config.AllowVolatileStore is set. When the store has a clock
// ([StoreClock]) it measures its offset to it (see Config.ClockSync) and
// fails when the store does not answer. ctx bounds these questions only.
func NewContext(ctx context.Context, store Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, errors.New("idem: New: store is nil")
	}
	wallClock := cfg.Clock == nil
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := checkDurability(ctx, store, &cfg); err != nil {
		return nil, err
	}
	if err := checkReplication(ctx, store, &cfg); err != nil {
		return nil, err
	}
	e := &Engine{store: store, cfg: cfg, cache: newReplayCache(cfg.ReplayCache, store), observe: observing(cfg.Observer), wallClock: wallClock, sync: &clockSync{}}
	if err := e.startClockSync(ctx); err != nil {
		return nil, fmt.Errorf("idem: New: reading the store's clock: %w", err)
	}
	e.startReplicationWatch()
	e.cacheOnFinish = e.cache != nil && cfg.ReplayCache.CacheRecorded && !processLocal(store)
	e.flights.init(e)
	e.abandonCtx, e.stopAbandon = context.WithCancel(context.Background())
	if cfg.Spool != nil {
		var sctx context.Context
		sctx, e.stopSpool = context.WithCancel(context.Background())
		e.spoolDone = make(chan struct{})
		go e.spoolLoop(sctx, e.spoolDone)
	}
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// WithStore returns an engine with the same configuration over a
// transaction-bound view of the store (see the SQL stores' WithTx), so that
// a local effect and its record commit together.
//
// The returned engine uses the store only from the calling goroutine, as a
// database transaction requires: it runs no background heartbeats (nobody
// else can see the claim before the transaction commits, so its lease does
// not matter) and has no replay cache (what it reads may still roll back).
func (e *Engine) WithStore(s Store) *Engine {
	n := &Engine{store: s, cfg: e.cfg, txBound: true, observe: e.observe, wallClock: e.wallClock, sync: e.sync}
	n.cfg.Spool = nil // an outcome that cannot commit rolls back with its transaction
	n.flights.init(n)
	return n
}

// Close stops the engine's background waits and the re-applying of
// spooled outcomes (what is still spooled stays in the spool's files for
// the next engine that opens it). Calls after Close return ErrClosed. It
// does not close the store.
func (e *Engine) Close() error {
	e.closed.Store(true)
	e.flights.closeAll()
	e.beats.idle()
	if !e.txBound {
		e.stopClockSync()
		e.stopReplicationWatch()
	}
	if e.stopSpool != nil {
		e.stopSpool()
		<-e.spoolDone
	}
	if e.stopAbandon != nil {
		e.stopAbandon()
		e.abandoning.Wait()
	}
	return nil
}

// Request describes one intent.
type Request struct {
	// Scope is who the key belongs to (tenant, principal). Uniqueness is on
	// (Scope, Key); one scope never sees another's record.
	Scope string
	// Key is the intent's identity; validated by the engine.
	Key Key
	// Fingerprint is the hash of the canonical request. The same key with
	// another fingerprint is refused with ErrMismatch.
	Fingerprint Fingerprint
	// Operation names the operation, for metrics and logs.
	Operation string
	// Intent, when set, is written with the claim before the effect runs.
	Intent *Intent
	// LazyIntent, when Intent is nil, builds the intent only when a claim
	// is about to be written, so that a replay served from the replay
	// cache builds none. It is called at most once per call, on the
	// calling goroutine, before the effect runs.
	LazyIntent IntentBuilder
	// Policy overrides the engine's defaults for this operation.
	Policy Policy
}

// Result describes how an intent ended.
type Result struct {
	// Value is the recorded value (succeeded) or failure message (failed).
	Value []byte
	// State is StateSucceeded or StateFailed.
	State State
	// Replayed is true when the effect did not run in this call and the
	// recorded outcome was returned.
	Replayed bool
	// Record is the record as last seen by the engine.
	Record Record
}

// Handler is an effect that returns raw bytes to record.
type Handler func(ctx context.Context, a *Attempt) ([]byte, error)

// DoBytes runs req's effect at most once per intent and returns the
// recorded outcome. See the package documentation for how the handler's
// return maps to a state:
//   - nil error: succeeded; the value is recorded and replayed.
//   - an error wrapped with [Release]: no effect happened; the claim is
//     deleted and the error returned.
//   - an error wrapped with [Unknown], a context deadline or cancellation,
//     a timeout, or a panic: unknown (a panic is re-raised after recording).
//   - any other error: failed; its message is recorded and the error is
//     returned as a [*FailureError] (on replays too).
//
// Errors from DoBytes itself: [ErrInvalidKey], [ErrMismatch], [ErrInFlight],
// [ErrUnknownOutcome], [ErrFenced] (the effect ran but the claim was taken
// over before the outcome was recorded), [ErrStoreUnavailable], [ErrClosed].
func (e *Engine) DoBytes(ctx context.Context, req Request, h Handler) (res Result, err error) {
	// Results are written through &res, so that this frame, on the stack
	// of every caller parked in the call, holds no Result of its own.
	if e.flights.holding(req.Scope, string(req.Key), req.Fingerprint) {
		err = e.doHeld(ctx, &req, h, &res)
		return res, err
	}
	err = e.doBytes(ctx, &req, h, &res)
	return res, err
}

// doBytes is DoBytes for a request that is not a duplicate of an effect
// this engine is running.
func (e *Engine) doBytes(ctx context.Context, req *Request, h Handler, res *Result) error {
	if !e.observe {
		r, _, err := e.do(ctx, req, h)
		*res = r
		return err
	}
	start := e.cfg.Clock()
	r, out, err := e.do(ctx, req, h)
	*res = r
	e.observeOutcome(ctx, req, out, start, err)
	return err
}

// observeOutcome reports the outcome of a DoBytes call that started at
// start (engine clock).
func (e *Engine) observeOutcome(ctx context.Context, req *Request, out Outcome, start time.Time, err error) {
	e.cfg.Observer.Observe(ctx, Event{
		Kind: EventOutcome, Outcome: out, Operation: req.Operation,
		Scope: req.Scope, Key: string(req.Key), Duration: e.cfg.Clock().Sub(start), Err: err,
	})
}

func (e *Engine) do(ctx context.Context, req *Request, h Handler) (Result, Outcome, error) {
	if e.closed.Load() {
		return Result{}, OutcomeError, ErrClosed
	}
	if h == nil {
		return Result{}, OutcomeError, errors.New("idem: DoBytes: handler is nil")
	}
	if err := ValidateKey(string(req.Key)); err != nil {
		return Result{}, OutcomeError, err
	}
	if err := ValidateScope(req.Scope); err != nil {
		return Result{}, OutcomeError, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, OutcomeError, err
	}
	pol := e.policy(req.Policy)
	// now, once read for the cache, is also the first claim's time: the
	// two are the same moment within the building of the intent.
	var now time.Time
	if e.cache != nil {
		now = e.now()
		if rec, ok := e.cache.get(req.Scope, string(req.Key), now); ok {
			return e.replay(req, &rec)
		}
	}
	if o, ok := e.cfg.Spool.lookup(req.Scope, string(req.Key)); ok && !o.Release {
		// Known here, not yet in the store: answer from the spool.
		rec := o.record()
		if err := e.openRecord(&rec); err != nil {
			return Result{}, OutcomeError, err
		}
		return e.replay(req, &rec)
	}
	// A duplicate of a key this engine holds was sent to doHeld by DoBytes.
	return e.claimLoop(ctx, req, pol, h, time.Time{}, now)
}

// claimLoop claims the key and runs the effect, replays the recorded
// outcome, or waits for an in-flight attempt (until waitDeadline once set)
// and looks again. A non-zero now is the engine clock read just before,
// used for the first claim.
func (e *Engine) claimLoop(ctx context.Context, req *Request, pol Policy, h Handler, waitDeadline, now time.Time) (Result, Outcome, error) {
	// The journal is encoded only when a claim is about to be written.
	var intent []byte
	if req.Intent == nil && req.LazyIntent != nil {
		req.Intent = req.LazyIntent.BuildIntent()
	}
	if req.Intent != nil {
		intent = encodeIntent(req.Intent)
		if bound := e.cfg.MaxIntent; bound > 0 && len(intent) > bound {
			return Result{}, OutcomeError, &IntentTooLargeError{Size: len(intent), Max: bound}
		}
		if e.cfg.Encryption != nil {
			// Sealed once: every claim of this call writes the same bytes.
			var err error
			if intent, err = e.cfg.Encryption.SealIntent(req.Scope, string(req.Key), intent); err != nil {
				return Result{}, OutcomeError, err
			}
		}
	}
	attemptID := newAttemptID()
	for {
		if now.IsZero() {
			now = e.now()
		}
		cr, err := e.claim(ctx, ClaimParams{
			Scope: req.Scope, Key: string(req.Key), Fingerprint: req.Fingerprint,
			AttemptID: attemptID, Intent: intent, Now: now, LeaseUntil: now.Add(pol.Lease),
		})
		if err != nil {
			e.abandonClaim(ctx, req, attemptID, now.Add(pol.Lease))
			if ctx.Err() != nil {
				return Result{}, OutcomeCancelled, err
			}
			return Result{}, OutcomeError, err
		}
		rec := &cr.Record
		if cr.Claimed {
			return e.run(ctx, req, pol, *rec, h, false)
		}
		if rec.State.Terminal() {
			e.cache.put(req.Scope, string(req.Key), rec)
			return e.replay(req, rec)
		}
		if rec.Fingerprint != req.Fingerprint {
			return Result{}, OutcomeMismatch, &MismatchError{Scope: req.Scope, Key: string(req.Key), Record: clonePtr(rec)}
		}
		switch rec.State {
		case StateUnknown:
			return e.onUnknown(ctx, req, pol, *rec, h)
		}
		// In progress.
		if rec.LeaseExpired(now) {
			urec, err := e.markUnknown(ctx, *rec, now)
			if errors.Is(err, ErrFenced) {
				now = time.Time{}
				continue // the record moved on; look again
			}
			if err != nil {
				return Result{}, OutcomeError, err
			}
			return e.onUnknown(ctx, req, pol, *urec, h)
		}
		if pol.InFlight == InFlightReject {
			return Result{}, OutcomeConflict, e.inFlight(req)
		}
		if waitDeadline.IsZero() {
			waitDeadline = time.Now().Add(pol.Wait)
		}
		// Claim again unless the attempt recorded an outcome: a released
		// key is free (one waiter wins), an unknown or expired record is
		// reported by the claim path, claiming at this now.
		var done bool
		var res Result
		var out Outcome
		if res, out, now, done, err = e.waitTurn(ctx, req, waitDeadline); done {
			return res, out, err
		}
	}
}

// waitTurn waits, until deadline, for the in-flight attempt on req's key
// to settle. When it recorded an outcome, that outcome is replayed from
// the record the shared watch read, with no further store read, and done
// is true; so is it when the wait failed (ErrInFlight at the deadline,
// ctx's error). Otherwise — released, unknown, expired — done is false and
// now is the time to claim again at.
func (e *Engine) waitTurn(ctx context.Context, req *Request, deadline time.Time) (res Result, out Outcome, now time.Time, done bool, err error) {
	settled, err := e.wait(ctx, req.Scope, string(req.Key), deadline)
	now, done, out, err = e.turn(req, settled, err, &res)
	return res, out, now, done, err
}

// inFlight is the conflict answered to a duplicate of an in-flight attempt.
func (e *Engine) inFlight(req *Request) error {
	return &InFlightError{Scope: req.Scope, Key: string(req.Key), RetryAfter: e.cfg.RetryAfter}
}

// replay returns a terminal record's outcome, or a mismatch when the
// request differs from the one that claimed the key.
func (e *Engine) replay(req *Request, rec *Record) (Result, Outcome, error) {
	if rec.Fingerprint != req.Fingerprint {
		return Result{}, OutcomeMismatch, &MismatchError{Scope: req.Scope, Key: string(req.Key), Record: clonePtr(rec)}
	}
	res := Result{Value: rec.Result, State: rec.State, Replayed: true, Record: *rec}
	if rec.State == StateFailed {
		return res, OutcomeReplay, &FailureError{Message: string(rec.Result), Replayed: true}
	}
	return res, OutcomeReplay, nil
}

func (e *Engine) policy(p Policy) Policy {
	if p.InFlight == InFlightDefault {
		p.InFlight = e.cfg.InFlight
	}
	if p.Wait <= 0 {
		p.Wait = e.cfg.Wait
	}
	if p.Lease <= 0 {
		p.Lease = e.cfg.Lease
	}
	if p.Timeout <= 0 {
		p.Timeout = e.cfg.EffectTimeout
	}
	return p
}

// now is the engine clock plus the offset to the store's clock, truncated
// to the precision stores keep: the time every lease and expiry is decided
// at.
func (e *Engine) now() time.Time {
	return e.cfg.Clock().Add(time.Duration(e.sync.offset.Load())).UTC().Truncate(time.Microsecond)
}

// nowAt is now, from wall (a time.Now reading just taken) when the engine
// clock is the wall clock.
func (e *Engine) nowAt(wall time.Time) time.Time {
	if e.wallClock {
		return wall.Add(time.Duration(e.sync.offset.Load())).UTC().Truncate(time.Microsecond)
	}
	return e.now()
}

// onUnknown re-drives a re-drivable operation under a new fence with the
// same key, or reports the unknown outcome.
func (e *Engine) onUnknown(ctx context.Context, req *Request, pol Policy, rec Record, h Handler) (Result, Outcome, error) {
	if !pol.Redrivable {
		return Result{Record: rec}, OutcomeUnknown, &UnknownOutcomeError{Scope: req.Scope, Key: string(req.Key), Record: &rec, RetryAfter: e.cfg.RetryAfter}
	}
	now := e.now()
	nrec, err := e.resolve(ctx, ResolveParams{
		Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence, From: []State{StateUnknown},
		To: StateInProgress, AttemptID: newAttemptID(), Now: now, LeaseUntil: now.Add(pol.Lease),
	})
	if err != nil {
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) {
			// Someone else re-drove or resolved it first.
			return Result{Record: rec}, OutcomeConflict, &InFlightError{Scope: req.Scope, Key: string(req.Key), RetryAfter: e.cfg.RetryAfter}
		}
		return Result{}, OutcomeError, err
	}
	return e.run(ctx, req, pol, *nrec, h, true)
}

// runState is what one run of an effect needs beyond the call's own
// variables — the attempt handed to the handler, its heartbeat and the
// context its outcome is recorded under — allocated at once.
type runState struct {
	att Attempt
	hb  heartbeater
	eff effectCtx
	fin finishCtx
}

// run executes the effect under the claim rec and records its outcome.
func (e *Engine) run(ctx context.Context, req *Request, pol Policy, rec Record, h Handler, redrive bool) (res Result, out Outcome, err error) {
	in := req.Intent // the journal this claim wrote; decode only a re-driven record's
	if in == nil {
		in, _ = DecodeIntent(rec.Intent)
	}
	rs := &runState{att: Attempt{Scope: rec.Scope, Key: Key(rec.Key), Fence: rec.Fence, ID: rec.AttemptID, Intent: in, Redrive: redrive}}
	rs.fin.timers = &e.finTimers
	// Finishing work outlives the caller: a cancelled caller never turns a
	// started effect into a release. fctx is context.WithTimeout(
	// context.WithoutCancel(ctx), FinishTimeout), made when it is needed.
	fctx := &rs.fin
	fin := func() context.Context {
		fctx.init(ctx, e.cfg.FinishTimeout)
		return fctx
	}
	if err := ctx.Err(); err != nil {
		// The effect has not started: releasing is the truth.
		defer fctx.cancel()
		_ = e.release(fin(), rec)
		return Result{}, OutcomeReleased, err
	}

	e.flights.hold(&rec)
	// Every way out of here (outcome recorded, finish failed, panic) ends
	// the hold and pokes local waiters after the outcome is written.
	defer e.flights.unhold(rec.Scope, rec.Key)

	// Once started, the effect belongs to the intent, not to the caller:
	// it keeps the caller's values but not its cancellation, and ends at
	// its own timeout (or when the heartbeat finds the claim taken over).
	// The timeout is enforced by the heartbeat schedule, which already
	// holds a slot for this attempt (see effectCtx): a timer context of
	// its own would cost the request path a timer and a parent link.
	effCtx, cancelEff := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelEff(nil)
	deadline := time.Now().Add(pol.Timeout)
	if e.txBound { // no heartbeat schedule: a timer of its own
		var c context.CancelFunc
		effCtx, c = context.WithDeadline(effCtx, deadline)
		defer c()
	}
	rs.eff = effectCtx{Context: effCtx, deadline: deadline}
	hb := &rs.hb
	*hb = heartbeater{e: e, ctx: effCtx, cancel: cancelEff, scope: rec.Scope, key: rec.Key, fence: rec.Fence, id: rec.AttemptID, lease: pol.Lease, deadline: deadline}
	hb.start(rec.LeaseUntil)
	rs.att.heartbeat = hb
	observe := e.observe
	if observe {
		e.cfg.Observer.Observe(ctx, Event{Kind: EventInFlight, Delta: 1, Operation: req.Operation})
		defer e.cfg.Observer.Observe(ctx, Event{Kind: EventInFlight, Delta: -1, Operation: req.Operation})
	}

	defer func() {
		if p := recover(); p != nil {
			hb.stop()
			defer fctx.cancel()
			if _, ferr := e.finish(fin(), rec, StateUnknown, nil); ferr != nil {
				e.cfg.Logger.Error("idem: record unknown after panic", "key_hash", hashForLog(rec.Scope, rec.Key), "err", ferr)
			}
			if observe {
				e.cfg.Observer.Observe(ctx, Event{Kind: EventOutcome, Outcome: OutcomeUnknown, Operation: req.Operation, Scope: req.Scope, Key: string(req.Key)})
			}
			panic(p) // the deferred unhold pokes the waiters
		}
	}()
	val, herr := h(&rs.eff, &rs.att)
	hb.stop()
	if cause := context.Cause(effCtx); herr != nil && errors.Is(cause, ErrFenced) {
		herr = Unknown(herr)
	}

	defer fctx.cancel()
	// One clock reading starts the finish deadline, stamps the outcome
	// (with the default clock) and dates the cache entry.
	wall := time.Now()
	fctx.initAt(ctx, e.cfg.FinishTimeout, wall)
	switch {
	case herr == nil:
		now := e.nowAt(wall)
		sval, serr := e.sealResult(&rec, val)
		if serr != nil {
			return e.finishFailed(serr)
		}
		frec, ferr := e.finishAt(fctx, rec, StateSucceeded, sval, now)
		if ferr != nil {
			if frec, ok := e.spoolAfter(ferr, rec, StateSucceeded, sval, now, false); ok {
				e.plainFinished(frec, &rec, val)
				return Result{Value: val, State: StateSucceeded, Record: *frec}, OutcomeFirst, nil
			}
			if frec, lerr := e.onRefusedOutcome(fctx, req, rec, StateSucceeded, sval, now, ferr); frec != nil {
				e.plainFinished(frec, &rec, val)
				return Result{Value: val, State: StateSucceeded, Record: *frec}, OutcomeLostClaim, nil
			} else {
				ferr = lerr
			}
			return e.finishFailed(ferr)
		}
		e.plainFinished(frec, &rec, val)
		if e.cacheOnFinish {
			e.cache.putOwned(rec.Scope, rec.Key, frec, wall) // frec is ours: the store returned it
		}
		return Result{Value: val, State: StateSucceeded, Record: *frec}, OutcomeFirst, nil
	case errors.Is(herr, ErrReleased):
		if rerr := e.release(fctx, rec); rerr != nil {
			if _, ok := e.spoolAfter(rerr, rec, "", nil, e.nowAt(wall), true); !ok {
				return e.finishFailed(rerr)
			}
		}
		return Result{}, OutcomeReleased, herr
	case errors.Is(herr, ErrUnknown) || errors.Is(herr, context.Canceled) || errors.Is(herr, context.DeadlineExceeded):
		if _, ferr := e.finish(fctx, rec, StateUnknown, nil); ferr != nil {
			if errors.Is(ferr, ErrFenced) || errors.Is(ferr, ErrNotFound) {
				// Logged and counted when the store lost the claim.
				_, _ = e.onRefusedOutcome(fctx, req, rec, StateUnknown, nil, e.nowAt(wall), ferr)
			} else {
				e.cfg.Logger.Error("idem: record unknown", "key_hash", hashForLog(rec.Scope, rec.Key), "err", ferr)
			}
		}
		r := rec
		return Result{Record: rec}, OutcomeUnknown, &UnknownOutcomeError{Scope: req.Scope, Key: string(req.Key), Record: &r, RetryAfter: e.cfg.RetryAfter}
	default:
		msg := herr.Error()
		now := e.nowAt(wall)
		sval, serr := e.sealResult(&rec, []byte(msg))
		if serr != nil {
			return e.finishFailed(serr)
		}
		frec, ferr := e.finishAt(fctx, rec, StateFailed, sval, now)
		if ferr != nil {
			if frec, ok := e.spoolAfter(ferr, rec, StateFailed, sval, now, false); ok {
				e.plainFinished(frec, &rec, []byte(msg))
				return Result{Value: []byte(msg), State: StateFailed, Record: *frec}, OutcomeFailed, &FailureError{Message: msg, Err: herr}
			}
			if frec, lerr := e.onRefusedOutcome(fctx, req, rec, StateFailed, sval, now, ferr); frec != nil {
				e.plainFinished(frec, &rec, []byte(msg))
				return Result{Value: []byte(msg), State: StateFailed, Record: *frec}, OutcomeLostClaim, &FailureError{Message: msg, Err: herr}
			} else {
				ferr = lerr
			}
			return e.finishFailed(ferr)
		}
		e.plainFinished(frec, &rec, []byte(msg))
		return Result{Value: []byte(msg), State: StateFailed, Record: *frec}, OutcomeFailed, &FailureError{Message: msg, Err: herr}
	}
}

// spoolAfter spools an outcome whose write failed with err, unless err is
// the store's fenced answer (the claim was taken over: the outcome is not
// ours to record).
func (e *Engine) spoolAfter(err error, rec Record, st State, val []byte, now time.Time, release bool) (*Record, bool) {
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) {
		return nil, false
	}
	return e.spoolOutcome(rec, st, val, now, release, err)
}

// finishFailed reports an outcome that could not be recorded. The effect may
// have run; the record stays in_progress and becomes unknown after its lease,
// so it is never run again by a duplicate.
func (e *Engine) finishFailed(err error) (Result, Outcome, error) {
	if errors.Is(err, ErrStoreLostClaim) {
		return Result{}, OutcomeLostClaim, err
	}
	if errors.Is(err, ErrFenced) {
		return Result{}, OutcomeFenced, err
	}
	return Result{}, OutcomeUnknown, err
}

// abandonClaim cleans up after a claim whose answer was lost: if the claim
// did commit under our attempt id, no effect has run, so releasing is true.
// A claim cut off by a store outage is the common case, and then the store
// does not answer the clean-up either: rather than leave a claim with no
// effect behind it (in_progress, so retries get 409, then unknown after
// its lease), the clean-up goes on while the caller gets its answer at
// once. With a [Spool] the abandoned claim is written there (fsync'd) and
// released, fenced, whenever the store answers — after a pause longer
// than FinishTimeout, after a restart — including a claim that lands late
// (one still queued on a connection of a paused store) until its lease
// passes. Without one it is retried in the background, with backoff, for
// FinishTimeout like an outcome write.
func (e *Engine) abandonClaim(ctx context.Context, req *Request, attemptID string, leaseUntil time.Time) {
	// scope and key are copied so that the goroutine below does not hold
	// req: that would move every caller's Request to the heap.
	scope, key := req.Scope, string(req.Key)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.FinishTimeout)
	rec, err := e.store.Get(fctx, scope, key)
	if err != nil && retryable(fctx, err) && e.spoolAbandoned(req, attemptID, leaseUntil, err) {
		cancel()
		return
	}
	if err != nil && retryable(fctx, err) && e.abandonCtx != nil {
		e.abandoning.Add(1)
		stop := context.AfterFunc(e.abandonCtx, cancel) // Close ends it
		go func() {
			defer e.abandoning.Done()
			defer stop()
			defer cancel()
			err := e.retryFinishing(fctx, "get", func() (err error) {
				rec, err = e.store.Get(fctx, scope, key)
				return err
			})
			if err == nil && rec.AttemptID == attemptID && rec.State == StateInProgress {
				_ = e.release(fctx, *rec)
			}
		}()
		return
	}
	defer cancel()
	if err != nil || rec.AttemptID != attemptID || rec.State != StateInProgress {
		return
	}
	_ = e.release(fctx, *rec)
}

// clonePtr returns a pointer to a copy of *r, for errors that outlive the
// call's own variables.
func clonePtr(r *Record) *Record {
	c := *r
	return &c
}

// newAttemptID returns 128 random bits in hex. They need to be unique, not
// secret: the runtime's ChaCha8 generator (seeded from the OS, per thread)
// gives that without a system call.
func newAttemptID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// doHeld answers a duplicate of a key this engine holds (DoBytes found
// it held): it is rejected or waits for the outcome, as do would answer it,
// with no store claim of its own.
//
// It runs right under DoBytes, not under do and the claim loop, whose
// frames are large, so that a goroutine parked here keeps a 4 KiB stack
// under a plain `res, err := e.DoBytes(...)` caller, not 8 KiB. Results
// are written through res, so that no frame down to the parking point holds
// a Result. The replay cache is not consulted: this engine's claim of the
// key found no recorded outcome to replay, so the cache has none current.
func (e *Engine) doHeld(ctx context.Context, req *Request, h Handler, res *Result) error {
	var start time.Time
	if e.observe {
		start = e.cfg.Clock()
	}
	var out Outcome
	var err error
	// The checks do makes before the key's state matters (a held key is
	// valid: it was claimed), then do's answer to an in-flight duplicate.
	switch pol := e.policy(req.Policy); {
	case e.closed.Load():
		out, err = OutcomeError, ErrClosed
	case h == nil:
		out, err = OutcomeError, errors.New("idem: DoBytes: handler is nil")
	case ctx.Err() != nil:
		out, err = OutcomeError, ctx.Err()
	case pol.InFlight == InFlightReject:
		out, err = OutcomeConflict, e.inFlight(req)
	default:
		deadline := time.Now().Add(pol.Wait)
		settled, werr := e.wait(ctx, req.Scope, string(req.Key), deadline)
		out, err = e.afterHeld(ctx, req, h, &deadline, settled, werr, res)
	}
	if e.observe {
		e.observeOutcome(ctx, req, out, start, err)
	}
	return err
}

// afterHeld continues a duplicate of a held key once its wait returned:
// the recorded outcome is replayed; released, unknown or expired, the claim
// loop decides, within what is left of the wait bound.
func (e *Engine) afterHeld(ctx context.Context, req *Request, h Handler, deadline *time.Time, settled *Record, werr error, res *Result) (Outcome, error) {
	now, done, out, err := e.turn(req, settled, werr, res)
	if done {
		return out, err
	}
	*res, out, err = e.claimLoop(ctx, req, e.policy(req.Policy), h, *deadline, now)
	return out, err
}

// turn decides, once a wait returned settled and werr, whether the waiter
// is done. When the in-flight attempt recorded an outcome, that outcome is
// replayed into *res from the record the shared watch read, with no further
// store read, and done is true; so is it when the wait failed (ErrInFlight
// at the deadline, ctx's error). Otherwise — released, unknown, expired —
// done is false and now is the time to claim again at.
func (e *Engine) turn(req *Request, settled *Record, werr error, res *Result) (now time.Time, done bool, out Outcome, err error) {
	if werr != nil {
		if errors.Is(werr, ErrInFlight) {
			return now, true, OutcomeConflict, e.inFlight(req)
		}
		return now, true, OutcomeError, werr
	}
	now = e.now()
	if settled != nil && settled.State.Terminal() && !settled.Expired(now) {
		e.cache.put(req.Scope, string(req.Key), settled)
		*res, out, err = e.replay(req, settled)
		return now, true, out, err
	}
	return now, false, out, nil
}
