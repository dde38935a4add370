package idem

import (
	"context"
	"errors"
	"sync"
	"time"
)

// heartbeater extends an attempt's lease while its effect runs. It holds no
// timer of its own: most effects finish well inside a third of their lease
// and never need a beat, so starting one costs a push on the engine's
// heartbeat schedule, and stopping it a removal.
type heartbeater struct {
	e      *Engine
	ctx    context.Context // the effect's context: beats end with it
	cancel context.CancelCauseFunc
	scope  string
	key    string
	fence  int64
	id     string // attempt id
	lease  time.Duration
	every  time.Duration
	// deadline is the effect's timeout: at it the schedule cancels ctx
	// with cause context.DeadlineExceeded instead of beating. Zero: none.
	deadline time.Time

	running sync.WaitGroup // beats in progress

	// Guarded by the schedule's mutex.
	stopped bool
	due     time.Time
	idx     int // position in the schedule's heap; -1 when not scheduled
}

// beat extends the lease now. When the store says the attempt is fenced, the
// effect's context is cancelled with ErrFenced: another attempt owns the key.
func (h *heartbeater) beat(ctx context.Context) error {
	e := h.e
	until := e.now().Add(h.lease)
	err := e.retry(ctx, "heartbeat", func() error {
		return e.store.Heartbeat(ctx, HeartbeatParams{Scope: h.scope, Key: h.key, Fence: h.fence,
			AttemptID: h.id, LeaseUntil: until})
	})
	if err == nil {
		e.flights.extend(h.scope, h.key, until)
	}
	if errors.Is(err, ErrFenced) {
		h.cancel(ErrFenced)
	}
	return err
}

// start schedules the first beat a third of the lease after the claim,
// whose lease runs to leaseUntil. With the engine's clock the wall clock,
// that instant is read off leaseUntil, which saves reading the clock again;
// otherwise it is a third of the lease from now. Engines bound to a
// caller's transaction schedule none: beat still works on demand, from the
// caller's goroutine.
func (h *heartbeater) start(leaseUntil time.Time) {
	h.idx = -1
	h.every = h.lease / 3
	if h.e.txBound {
		return
	}
	var due time.Time
	if h.e.wallClock && !leaseUntil.IsZero() {
		// leaseUntil is on the store's clock; due is on this host's.
		due = leaseUntil.Add(h.every - h.lease - time.Duration(h.e.sync.offset.Load()))
	} else {
		due = time.Now().Add(h.every)
	}
	h.e.beats.add(h, h.until(due))
}

// stop prevents further beats and waits for one in progress to end, so no
// heartbeat reaches the store after the outcome is recorded.
func (h *heartbeater) stop() {
	if !h.e.txBound {
		h.e.beats.stop(h)
	}
	h.running.Wait()
}

// fire runs one scheduled beat and schedules the next.
func (h *heartbeater) fire() {
	s := &h.e.beats
	s.mu.Lock()
	if h.stopped {
		s.mu.Unlock()
		return
	}
	h.running.Add(1)
	s.mu.Unlock()
	defer h.running.Done()
	if !h.deadline.IsZero() && !time.Now().Before(h.deadline) {
		h.cancel(context.DeadlineExceeded) // the effect's timeout
		return
	}
	if err := h.beat(h.ctx); errors.Is(err, ErrFenced) || h.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	if !h.stopped {
		s.addLocked(h, h.until(time.Now().Add(h.every)))
	}
	s.mu.Unlock()
}

// until is due, or the effect's deadline when that comes first.
func (h *heartbeater) until(due time.Time) time.Time {
	if !h.deadline.IsZero() && h.deadline.Before(due) {
		return h.deadline
	}
	return due
}

// effectCtx is the context an effect runs under: the caller's values
// without its cancellation (context.WithoutCancel), cancelled when the
// heartbeat finds the claim taken over (cause ErrFenced) or at the
// effect's timeout (cause context.DeadlineExceeded, fired by the heartbeat
// schedule). It reports that deadline and, past it, DeadlineExceeded, as
// context.WithTimeout's context would; it lives in the run's state, so the
// timeout costs the request path neither a timer nor an allocation.
type effectCtx struct {
	context.Context // a context.WithCancelCause of the detached caller context
	deadline        time.Time
}

// Deadline implements context.Context.
func (c *effectCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err implements context.Context: DeadlineExceeded once the timeout ended
// the effect.
func (c *effectCtx) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// beatSchedule is an engine's heartbeat schedule: a min-heap of the running
// attempts by the time of their next beat, and one timer armed for the
// earliest. Its mutex also guards each heartbeater's stopped flag, so
// that a stop is one lock round trip.
type beatSchedule struct {
	mu sync.Mutex
	h  []*heartbeater
	t  *time.Timer
	at time.Time // when t fires; zero when it is not armed
}

func (s *beatSchedule) add(h *heartbeater, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(h, due)
}

func (s *beatSchedule) addLocked(h *heartbeater, due time.Time) {
	h.due = due
	h.idx = len(s.h)
	s.h = append(s.h, h)
	s.up(h.idx)
	s.armLocked(due)
}

// stop marks h stopped, so that no beat of h starts, and unschedules it.
func (s *beatSchedule) stop(h *heartbeater) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.stopped = true
	i := h.idx
	if i < 0 {
		return
	}
	last := len(s.h) - 1
	if i != last {
		s.swap(i, last)
	}
	s.h[last] = nil
	s.h = s.h[:last]
	h.idx = -1
	if i != last {
		s.down(i)
		s.up(i)
	}
	// The timer stays armed: firing with nothing due re-arms it for the
	// next beat, if any.
}

// idle stops the timer when no attempt is scheduled, so that an armed
// timer does not keep a closed engine (and its store and cache) reachable
// until it fires. An attempt added later arms it again.
func (s *beatSchedule) idle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.h) == 0 && s.t != nil {
		s.t.Stop()
		s.at = time.Time{}
	}
}

// armLocked makes sure the timer fires no later than due.
func (s *beatSchedule) armLocked(due time.Time) {
	switch {
	case s.t == nil:
		s.t = time.AfterFunc(time.Until(due), s.fire)
	case s.at.IsZero() || due.Before(s.at):
		s.t.Reset(time.Until(due))
	default:
		return
	}
	s.at = due
}

// fire starts every beat that is due, each on its own goroutine (a beat is
// a store call), and re-arms the timer for the next.
func (s *beatSchedule) fire() {
	var due []*heartbeater
	s.mu.Lock()
	s.at = time.Time{}
	now := time.Now()
	for len(s.h) > 0 && !now.Before(s.h[0].due) {
		h := s.h[0]
		s.remove0Locked()
		due = append(due, h)
	}
	if len(s.h) > 0 {
		s.armLocked(s.h[0].due)
	}
	s.mu.Unlock()
	for _, h := range due {
		go h.fire()
	}
}

func (s *beatSchedule) remove0Locked() {
	h := s.h[0]
	last := len(s.h) - 1
	s.swap(0, last)
	s.h[last] = nil
	s.h = s.h[:last]
	h.idx = -1
	s.down(0)
}

func (s *beatSchedule) swap(i, j int) {
	s.h[i], s.h[j] = s.h[j], s.h[i]
	s.h[i].idx = i
	s.h[j].idx = j
}

func (s *beatSchedule) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.h[i].due.Before(s.h[p].due) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *beatSchedule) down(i int) {
	n := len(s.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.h[r].due.Before(s.h[l].due) {
			m = r
		}
		if !s.h[m].due.Before(s.h[i].due) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// finishCtx is the context an outcome is recorded under: the caller's
// values without its cancellation (context.WithoutCancel), bounded by
// FinishTimeout (context.WithTimeout). It behaves as that pair does, but
// costs no allocation and no timer unless a store asks for Done, Value or
// AfterFunc: Err compares the deadline with the clock, and a Done channel
// is closed at the deadline by the engine's one finishing timer
// (finishTimers), not a timer of its own.
type finishCtx struct {
	parent   context.Context
	deadline time.Time
	timers   *finishTimers // set by the engine before init

	mu     sync.Mutex
	err    error
	done   chan struct{}   // made on the first Done or AfterFunc
	vals   context.Context // context.WithoutCancel(parent), made on the first Value
	funcs  []*afterFunc
	joined bool // c is (or was) on timers' list

	// Guarded by timers.mu.
	prev, next *finishCtx
	listed     bool
}

type afterFunc struct{ f func() }

// init starts c's deadline; a second call (after a panic in a finish) keeps
// the first.
func (c *finishCtx) init(parent context.Context, d time.Duration) {
	if c.parent != nil {
		return
	}
	c.initAt(parent, d, time.Now())
}

// initAt is init with the clock already read (now); like init, it keeps
// a deadline already started.
func (c *finishCtx) initAt(parent context.Context, d time.Duration, now time.Time) {
	if c.parent != nil {
		return
	}
	c.parent = parent
	c.deadline = now.Add(d)
}

// Deadline implements context.Context.
func (c *finishCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err implements context.Context.
func (c *finishCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err
}

// Done implements context.Context.
func (c *finishCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchLocked()
	return c.done
}

// watchLocked makes c's Done channel and has the engine's finishing timer
// close it at the deadline.
func (c *finishCtx) watchLocked() {
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
			return
		}
	}
	if c.joined || c.err != nil {
		return
	}
	if !time.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
		return
	}
	c.joined = true
	if c.timers == nil {
		c.timers = new(finishTimers) // a context made outside an engine run
	}
	c.timers.join(c)
}

// Value implements context.Context: the parent's values, looked up as
// through context.WithoutCancel (which hides the parent's cancellation from
// context.Cause).
func (c *finishCtx) Value(key any) any {
	c.mu.Lock()
	if c.vals == nil {
		c.vals = context.WithoutCancel(c.parent)
	}
	v := c.vals
	c.mu.Unlock()
	return v.Value(key)
}

// AfterFunc arranges for f to run on its own goroutine when c ends, so that
// contexts derived from c with the context package need no goroutine each
// to watch it.
func (c *finishCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchLocked() // the timer closing done is what runs f at the deadline
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.funcs = append(c.funcs, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.funcs {
			if x == a {
				c.funcs = append(c.funcs[:i], c.funcs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends c with context.Canceled, as the CancelFunc of
// context.WithTimeout does, and takes it off the finishing timer's list.
func (c *finishCtx) cancel() { c.end(context.Canceled) }

func (c *finishCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.endLocked(err)
	}
}

func (c *finishCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.joined {
		c.timers.leave(c)
	}
	for _, a := range c.funcs {
		go a.f()
	}
	c.funcs = nil
}

// finishTimers ends an engine's finishing contexts at their deadlines with
// one timer, instead of a timer per context. A context joins its list when
// a store first asks for its Done channel or registers an AfterFunc (most
// finishes never do: the stores that do ask, ask once per call), and leaves
// it when it ends. Every deadline is FinishTimeout from a clock reading
// taken just before joining, so the list is in deadline order but for two
// goroutines that read the clock in one order and join in the other,
// microseconds apart: the timer is armed for the head, and firing ends
// every context from the head whose deadline has passed, so a context that
// joined behind a later deadline ends late by that much at most.
//
// Lock order: a finishCtx's mu before finishTimers.mu.
type finishTimers struct {
	mu         sync.Mutex
	head, tail *finishCtx
	t          *time.Timer
	at         time.Time // when t fires; zero when it is not armed
}

func (l *finishTimers) join(c *finishCtx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.prev, c.next, c.listed = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.armLocked(l.head.deadline)
}

func (l *finishTimers) leave(c *finishCtx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.listed {
		return
	}
	l.unlinkLocked(c)
	if l.head == nil && l.t != nil {
		// Nothing left to end: an armed timer would keep the engine
		// reachable until it fired.
		l.t.Stop()
		l.at = time.Time{}
	}
}

func (l *finishTimers) unlinkLocked(c *finishCtx) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

// armLocked makes sure the timer fires no later than due.
func (l *finishTimers) armLocked(due time.Time) {
	switch {
	case l.t == nil:
		l.t = time.AfterFunc(time.Until(due), l.fire)
	case l.at.IsZero() || due.Before(l.at):
		l.t.Reset(time.Until(due))
	default:
		return
	}
	l.at = due
}

// fire ends every context from the head of the list whose deadline has
// passed and re-arms the timer for the next.
func (l *finishTimers) fire() {
	var due []*finishCtx
	l.mu.Lock()
	l.at = time.Time{}
	now := time.Now()
	for l.head != nil && !now.Before(l.head.deadline) {
		c := l.head
		l.unlinkLocked(c)
		due = append(due, c)
	}
	if l.head != nil {
		l.armLocked(l.head.deadline)
	}
	l.mu.Unlock()
	for _, c := range due {
		c.end(context.DeadlineExceeded)
	}
}
