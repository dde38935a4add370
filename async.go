package idem

import (
	"context"
	"sync/atomic"
	"time"
)

// DoAsync runs req like [Engine.DoBytes] without blocking the caller: done is
// called exactly once with what DoBytes would have returned.
//
// Its use is a storm of duplicates: while this engine runs a key's effect, a
// duplicate with the same fingerprint and the [InFlightWait] policy is parked
// on the key's shared watch as a small record (a few hundred bytes) instead
// of a parked goroutine (a goroutine's stack is 2–8 KiB or more), so 10,000
// duplicates of one in-flight key cost a few MiB and one store read per
// wake-up. Every other request runs DoBytes on a goroutine of its own.
//
// done is called from an engine goroutine, never from the calling one; the
// parked duplicates of one key are answered one after another from the
// goroutine that saw the outcome, so done must not block (hand the result to
// a channel or start a goroutine). A parked duplicate is answered with the
// recorded outcome (Replayed), with [ErrInFlight] when its wait bound passes,
// or with ctx's error when ctx ends first.
func (e *Engine) DoAsync(ctx context.Context, req Request, h Handler, done func(Result, error)) {
	if done == nil {
		panic("idem: DoAsync: done is nil")
	}
	if h != nil && !e.closed.Load() && ctx.Err() == nil && ValidateKey(string(req.Key)) == nil && ValidateScope(req.Scope) == nil {
		pol := e.policy(req.Policy)
		if pol.InFlight == InFlightWait && e.flights.holding(req.Scope, string(req.Key), req.Fingerprint) {
			e.park(ctx, &req, pol, h, done)
			return
		}
	}
	go func() {
		res, err := e.DoBytes(ctx, req, h)
		done(res, err)
	}()
}

// asyncWaiter is a duplicate parked by DoAsync on a flight.
type asyncWaiter struct {
	e     *Engine
	ctx   context.Context
	req   Request
	pol   Policy
	h     Handler
	done  func(Result, error)
	f     *flight
	start time.Time
	// ended is set by whichever of settle, the wait bound and ctx comes
	// first; the others then do nothing.
	ended    atomic.Bool
	timer    *time.Timer
	stopCtx  func() bool
	deadline time.Time
}

// park registers a DoAsync duplicate on the key's flight. The waiter's
// fields are written under the flight group's lock, and read under it by
// end, whichever goroutine (timer, context, watch) gets there first.
func (e *Engine) park(ctx context.Context, req *Request, pol Policy, h Handler, done func(Result, error)) {
	w := &asyncWaiter{e: e, ctx: ctx, req: *req, pol: pol, h: h, done: done, start: time.Now()}
	w.deadline = w.start.Add(pol.Wait)
	g := &e.flights
	g.mu.Lock()
	defer g.mu.Unlock()
	w.f = g.joinLocked(req.Scope, string(req.Key))
	w.f.async = append(w.f.async, w)
	w.timer = time.AfterFunc(pol.Wait, w.expire)
	if ctx.Done() != nil {
		w.stopCtx = context.AfterFunc(ctx, w.cancel)
	}
}

// end claims the right to answer; false when another path already did.
// It stops the other paths and leaves the flight.
func (w *asyncWaiter) end() bool {
	if !w.ended.CompareAndSwap(false, true) {
		return false
	}
	g := &w.e.flights
	g.mu.Lock()
	t, stop, f := w.timer, w.stopCtx, w.f
	g.mu.Unlock()
	t.Stop()
	if stop != nil {
		stop()
	}
	g.leave(w.req.Scope, string(w.req.Key), f)
	return true
}

func (w *asyncWaiter) expire() {
	if w.end() {
		w.answer(Result{}, OutcomeConflict, &InFlightError{Scope: w.req.Scope, Key: string(w.req.Key), RetryAfter: w.e.cfg.RetryAfter})
	}
}

func (w *asyncWaiter) cancel() {
	if w.end() {
		w.answer(Result{}, OutcomeError, w.ctx.Err())
	}
}

// settled is called by the flight's watch with the record it read.
func (w *asyncWaiter) settled(rec *Record, err error) {
	if !w.end() {
		return
	}
	e := w.e
	switch {
	case err != nil:
		w.answer(Result{}, OutcomeError, err)
	case rec != nil && rec.State.Terminal() && !rec.Expired(e.now()):
		e.cache.put(w.req.Scope, string(w.req.Key), rec)
		res, out, rerr := e.replay(&w.req, rec)
		w.answer(res, out, rerr)
	default:
		// Released, unknown or expired: the claim loop decides, on a
		// goroutine of its own, within what is left of the wait bound.
		go func() {
			res, out, err := e.claimLoop(w.ctx, &w.req, w.pol, w.h, w.deadline, time.Time{})
			w.answer(res, out, err)
		}()
	}
}

// answer reports the outcome to the observer and to done.
func (w *asyncWaiter) answer(res Result, out Outcome, err error) {
	e := w.e
	d := time.Since(w.start)
	e.cfg.Observer.Observe(w.ctx, Event{Kind: EventWait, Scope: w.req.Scope, Key: string(w.req.Key), Duration: d})
	e.cfg.Observer.Observe(w.ctx, Event{Kind: EventOutcome, Outcome: out, Operation: w.req.Operation,
		Scope: w.req.Scope, Key: string(w.req.Key), Duration: d, Err: err})
	w.done(res, err)
}
