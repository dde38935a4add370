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
		due = leaseUntil.Add(h.every - h.lease)
	} else {
		due = time.Now().Add(h.every)
	}
	h.e.beats.add(h, due)
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
	if err := h.beat(h.ctx); errors.Is(err, ErrFenced) || h.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	if !h.stopped {
		s.addLocked(h, time.Now().Add(h.every))
	}
	s.mu.Unlock()
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
// costs no allocation and no timer unless a store asks for Done or Value:
// Err compares the deadline with the clock.
type finishCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	err   error
	done  chan struct{}   // made on the first Done
	t     *time.Timer     // closes done at the deadline
	vals  context.Context // context.WithoutCancel(parent), made on the first Value
	funcs map[*afterFunc]struct{}
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
	if c.done == nil {
		c.done = make(chan struct{})
		switch d := time.Until(c.deadline); {
		case c.err != nil:
			close(c.done)
		case d <= 0:
			c.endLocked(context.DeadlineExceeded)
		default:
			c.t = time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
		}
	}
	return c.done
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
	a := &afterFunc{f: f}
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.funcs == nil {
		c.funcs = make(map[*afterFunc]struct{})
	}
	c.funcs[a] = struct{}{}
	// The timer closing done is what runs f at the deadline.
	if c.t == nil && c.done == nil {
		c.done = make(chan struct{})
		c.t = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.funcs[a]; !ok {
			return false
		}
		delete(c.funcs, a)
		return true
	}
}

// cancel ends c with context.Canceled, as the CancelFunc of
// context.WithTimeout does, and frees its timer.
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
	if c.t != nil {
		c.t.Stop()
	}
	for a := range c.funcs {
		go a.f()
	}
	c.funcs = nil
}
