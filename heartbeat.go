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
		due = leaseUntil.Add(h.every - h.lease)
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
