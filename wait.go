package idem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// flightGroup shares one watch per (scope, key) among all waiters of this
// engine, so that N waiters cost one store read per wake-up, not N.
type flightGroup struct {
	e  *Engine
	mu sync.Mutex
	m  map[flightKey]*flight
	// held is the keys whose effect this engine is running right now. A
	// duplicate of a held key, with the same fingerprint, while the lease
	// this engine last wrote is live, is in flight without asking the store:
	// it waits on the shared flight (or is rejected) from a shallow stack,
	// with no claim of its own.
	held map[flightKey]heldKey
	// nheld is len(held), written under mu, so that holding answers
	// without the lock when this engine holds no key at all.
	nheld atomic.Int64
}

// heldKey is what this engine knows of a claim it holds.
type heldKey struct {
	fp         Fingerprint
	leaseUntil time.Time // as last written by the claim or a heartbeat
}

type flight struct {
	done   chan struct{} // closed when the record is no longer live in_progress
	pokeC  chan struct{} // this engine recorded something for the key
	refs   int
	cancel context.CancelFunc
	err    error
	rec    *Record        // the record as last read when the flight settled; nil if absent
	async  []*asyncWaiter // DoAsync duplicates parked on the flight
}

func (g *flightGroup) init(e *Engine) {
	g.e = e
	g.m = make(map[flightKey]*flight)
	g.held = make(map[flightKey]heldKey)
}

// hold marks (scope, key) as claimed by an effect running in this engine.
func (g *flightGroup) hold(rec *Record) {
	g.mu.Lock()
	g.held[flightKey{rec.Scope, rec.Key}] = heldKey{fp: rec.Fingerprint, leaseUntil: rec.LeaseUntil}
	g.nheld.Store(int64(len(g.held)))
	g.mu.Unlock()
}

// extend records a lease a heartbeat wrote.
func (g *flightGroup) extend(scope, key string, leaseUntil time.Time) {
	g.mu.Lock()
	k := flightKey{scope, key}
	if h, ok := g.held[k]; ok && leaseUntil.After(h.leaseUntil) {
		h.leaseUntil = leaseUntil
		g.held[k] = h
	}
	g.mu.Unlock()
}

// unhold ends hold and pokes the key's local flight, if any, under one
// lock round trip; it is called after the outcome has been written, so the
// poked watch reads it.
func (g *flightGroup) unhold(scope, key string) {
	k := flightKey{scope, key}
	g.mu.Lock()
	delete(g.held, k)
	g.nheld.Store(int64(len(g.held)))
	f := g.m[k]
	g.mu.Unlock()
	f.poke()
}

// holding reports whether this engine runs the effect of (scope, key) for a
// request with fingerprint fp under a lease that is live now (the clock is
// read only for a held key). Otherwise the store decides (a stalled
// holder's expired lease is the claim path's business: unknown, re-drive).
//
// A hold set concurrently with the call may be missed, as it may be when
// set just after the lookup: the store's claim then finds the key in
// progress, and the request waits for it there.
func (g *flightGroup) holding(scope, key string, fp Fingerprint) bool {
	if g.nheld.Load() == 0 {
		return false
	}
	g.mu.Lock()
	h, ok := g.held[flightKey{scope, key}]
	g.mu.Unlock()
	return ok && h.fp == fp && g.e.now().Before(h.leaseUntil)
}

// flightKey identifies a key in the flight group's maps (a struct, so a
// lookup builds no string).
type flightKey struct{ scope, key string }

// wait blocks until the record for (scope, key) is no longer a live
// in_progress record, until deadline (ErrInFlight), or until ctx ends. It
// returns the record the shared watch read when it settled (nil when the
// key was released), so that N waiters need no N further store reads.
func (e *Engine) wait(ctx context.Context, scope, key string, deadline time.Time) (rec *Record, err error) {
	// A parked caller's stack holds this frame: no defers or closures,
	// whose state would live in it.
	var start time.Time
	if e.observe {
		start = time.Now()
	}
	f := e.flights.join(scope, key)
	t := time.NewTimer(time.Until(deadline))
	select {
	case <-f.done:
		rec, err = f.rec, f.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = ErrInFlight
	}
	t.Stop()
	e.flights.leave(scope, key, f)
	if e.observe {
		e.observeWait(ctx, scope, key, start)
	}
	return rec, err
}

// observeWait reports a wait that started at start (time.Now).
func (e *Engine) observeWait(ctx context.Context, scope, key string, start time.Time) {
	e.cfg.Observer.Observe(ctx, Event{Kind: EventWait, Scope: scope, Key: key, Duration: time.Since(start)})
}

func (g *flightGroup) join(scope, key string) *flight {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joinLocked(scope, key)
}

func (g *flightGroup) joinLocked(scope, key string) *flight {
	k := flightKey{scope, key}
	f := g.m[k]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &flight{done: make(chan struct{}), pokeC: make(chan struct{}, 1), cancel: cancel}
		g.m[k] = f
		go g.watch(ctx, scope, key, f)
	}
	f.refs++
	return f
}

func (g *flightGroup) leave(scope, key string, f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.refs--
	if f.refs == 0 {
		f.cancel()
		if g.m[flightKey{scope, key}] == f {
			delete(g.m, flightKey{scope, key})
		}
	}
}

// poke tells a local flight that this engine just wrote the record.
func (g *flightGroup) poke(scope, key string) {
	g.mu.Lock()
	f := g.m[flightKey{scope, key}]
	g.mu.Unlock()
	f.poke()
}

// poke wakes f's watch; a nil f (no local waiter) is a no-op.
func (f *flight) poke() {
	if f != nil {
		select {
		case f.pokeC <- struct{}{}:
		default:
		}
	}
}

func (g *flightGroup) closeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, f := range g.m {
		f.cancel()
		delete(g.m, k)
	}
}

// watch reads the record on each wake-up — a local poke, a store
// notification, the lease deadline, or capped backoff — and settles the
// flight once the record is not a live in_progress record.
// maxNotifyFallback caps the interval of a watch's fallback polling when
// the store sends notifications (see [Config].PollMax).
const maxNotifyFallback = 30 * time.Second

func (g *flightGroup) watch(ctx context.Context, scope, key string, f *flight) {
	e := g.e
	var notify <-chan struct{}
	if n, ok := e.store.(Notifier); ok {
		ch, cancel, err := n.Subscribe(ctx, scope, key)
		if err == nil {
			notify = ch
			defer cancel()
		}
	}
	settle := func(rec *Record, err error) {
		g.mu.Lock()
		if g.m[flightKey{scope, key}] == f {
			delete(g.m, flightKey{scope, key})
		}
		// No one joins f after it left the map: the parked list is final.
		f.rec, f.err = rec, err
		async := f.async
		f.async = nil
		g.mu.Unlock()
		close(f.done)
		for _, w := range async {
			w.settled(rec, err)
		}
	}
	backoff := e.cfg.PollMin
	// With notifications, polling only covers a notification the store
	// failed to deliver: it starts at PollMax and doubles after every
	// wake-up, so a waiter's reads grow with the logarithm of its wait.
	fallback, fallbackMax := e.cfg.PollMax, max(e.cfg.PollMax, maxNotifyFallback)
	for {
		rec, err := e.get(ctx, scope, key)
		if ctx.Err() != nil {
			return
		}
		var next time.Duration
		switch {
		case isNotFound(err):
			settle(nil, nil)
			return
		case errors.Is(err, ErrRecordUnreadable):
			settle(nil, err) // no wait makes it readable
			return
		case err != nil:
			next = backoff // store trouble: keep trying until waiters give up
		case rec.EffectiveState(e.now()) != StateInProgress:
			settle(rec, nil)
			return
		default:
			next = backoff
			if notify != nil {
				next = fallback // notifications wake us; polling is the fallback
				fallback = min(fallback*2, fallbackMax)
			}
			if d := rec.LeaseUntil.Sub(e.now()) + time.Millisecond; d > 0 && d < next {
				next = d
			}
		}
		backoff = min(backoff*2, e.cfg.PollMax)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.pokeC:
		case <-notify:
		case <-t.C:
		}
		t.Stop()
	}
}
