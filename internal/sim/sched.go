package sim

import (
	"container/heap"
	"sync"
	"time"
)

// The scheduler runs one world on a fake clock. Every simulated actor that
// calls the engine (a client's call, an operator's resolution) is a task:
// a goroutine of its own that runs only while it holds the world's baton.
// The scheduler hands the baton to one task at a time and waits until that
// task parks (at a yield point: a store call leaving or answering, a step
// of the effect) or ends. So at any moment exactly one goroutine of the
// world runs, the order in which tasks run is the order of the event
// queue, and the event queue is a function of the seed: one seed, one
// history. Between events the clock jumps to the next event's time.

// event is one entry of the queue: fn runs on the scheduler's goroutine at
// time at. Ties are broken by insertion order (seq), which is itself
// deterministic.
type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// sched is a world's event loop and fake clock.
type sched struct {
	mu  sync.Mutex // guards now: the engine reads the clock from task goroutines
	now time.Time

	q      eventQueue
	seq    uint64
	parked chan struct{} // a task parked or ended: the baton is back
	cur    *task         // the task holding the baton, nil on the scheduler
}

func newSched(start time.Time) *sched {
	return &sched{now: start, parked: make(chan struct{})}
}

// Now is the world's clock (Config.Clock of every engine in it).
func (s *sched) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// at schedules fn at time t (not before now).
func (s *sched) at(t time.Time, fn func()) {
	if now := s.Now(); t.Before(now) {
		t = now
	}
	s.seq++
	heap.Push(&s.q, &event{at: t, seq: s.seq, fn: fn})
}

// after schedules fn d from now.
func (s *sched) after(d time.Duration, fn func()) { s.at(s.Now().Add(d), fn) }

// run runs events until the queue is empty or until is reached (zero:
// no bound); it returns false when it stopped at until.
func (s *sched) run(until time.Time) bool {
	for s.q.Len() > 0 {
		e := s.q[0]
		if !until.IsZero() && e.at.After(until) {
			return false
		}
		heap.Pop(&s.q)
		s.mu.Lock()
		if e.at.After(s.now) {
			s.now = e.at
		}
		s.mu.Unlock()
		e.fn()
	}
	return true
}

// task is one simulated actor's goroutine.
type task struct {
	s      *sched
	resume chan struct{}
	token  uint64 // bumped at every park; a wake-up for an old token is stale
	done   bool
	// killed is set when the process the task runs in died: the task
	// then runs to its end without parking again.
	killed bool
	// parkedAt names the yield point the task waits at (for kills: which
	// phase it died in).
	parkedAt string
	// data is the actor's state (a *taskCtx), read by the store
	// connection the task's calls go through.
	data any
}

// spawn starts body as a task at time t.
func (s *sched) spawn(t time.Time, data any, body func(*task)) *task {
	tk := &task{s: s, resume: make(chan struct{}), data: data}
	go func() {
		<-tk.resume
		body(tk)
		tk.done = true
		s.parked <- struct{}{}
	}()
	tok := tk.token
	s.at(t, func() { s.step(tk, tok) })
	return tk
}

// step hands the baton to tk, unless the wake-up is stale, and waits for
// it to come back.
func (s *sched) step(tk *task, tok uint64) {
	if tk.done || tk.token != tok {
		return
	}
	prev := s.cur
	s.cur = tk
	tk.resume <- struct{}{}
	<-s.parked
	s.cur = prev
}

// park gives the baton back to the scheduler for d of simulated time at
// the yield point where. It returns false when the task's process died
// meanwhile (or had died before): the caller must then stop as a dead
// process would.
func (tk *task) park(where string, d time.Duration) bool {
	if tk.killed {
		return false
	}
	s := tk.s
	tk.token++
	tok := tk.token
	tk.parkedAt = where
	s.after(d, func() { s.step(tk, tok) })
	s.parked <- struct{}{}
	<-tk.resume
	tk.parkedAt = ""
	return !tk.killed
}

// kill marks tk's process dead and, if tk is parked, wakes it at once so
// that it runs to its end (every store call of a dead process fails
// without parking). It is called from the scheduler's goroutine.
func (s *sched) kill(tk *task) {
	if tk.done {
		return
	}
	tk.killed = true
	tk.token++ // its pending wake-up is stale
	s.step(tk, tk.token)
}
