package idem

import (
	"context"
	"sync"
	"time"
)

// Why this file exists: every first-time call records its outcome under a
// context that outlives the caller, and the plain way to make one,
// context.WithTimeout(context.WithoutCancel(ctx), FinishTimeout), costs a
// first-time call five more allocations (15 instead of 10, 1733 B instead
// of 1445 B in BenchmarkEngineFirstTime on the memory store, 2026-12-01)
// and a runtime timer started and stopped per call. finishCtx keeps the
// same behaviour in the run's own state; TestEngineAllocations
// (allocs_test.go) is the ceiling it holds, and
// TestFinishCtxActsAsWithTimeoutWithoutCancel checks it behaves as the
// plain pair would.

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
