// Package commitqueue is what the SQL stores' group commit shares (and a
// third-party store may use): the
// queue that takes writes from callers, gathers them into batches and
// answers each caller, and the checks of its configuration (the public
// [groupcommit.Config]). Each store keeps its own way of running a batch in
// one transaction.
package commitqueue

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/groupcommit"
)

// Defaults validates c and fills in MaxSize. Errors name the field as
// pkg: Config.Batch.X.
func Defaults(pkg string, c groupcommit.Config) (groupcommit.Config, error) {
	switch {
	case c.Window < 0 || c.Window > groupcommit.MaxWindow:
		return c, fmt.Errorf("%s: Config.Batch.Window %s is outside [0, %s]", pkg, c.Window, groupcommit.MaxWindow)
	case c.Eager && c.Window != 0:
		return c, fmt.Errorf("%s: Config.Batch.Eager takes no window (Window is %s)", pkg, c.Window)
	case c.MaxSize < 0 || c.MaxSize > groupcommit.MaxSize:
		return c, fmt.Errorf("%s: Config.Batch.MaxSize %d is outside [0, %d]", pkg, c.MaxSize, groupcommit.MaxSize)
	case c.MaxSize == 0:
		c.MaxSize = groupcommit.DefaultSize
	}
	return c, nil
}

// Ticket is a queued write's state: queued until a batch takes it or its
// caller abandons it (context ended), never both.
type Ticket struct{ state atomic.Int32 }

const (
	queued int32 = iota
	taken
	abandoned
)

// Take moves a queued write into a batch; false if its caller left.
func (t *Ticket) Take() bool { return t.state.CompareAndSwap(queued, taken) }

// Abandon withdraws a queued write; false if a batch already took it (the
// caller must then wait for its answer).
func (t *Ticket) Abandon() bool { return t.state.CompareAndSwap(queued, abandoned) }

// Request is a queued write that carries a Ticket.
type Request interface{ GroupTicket() *Ticket }

// Collect gathers up to max requests after first, waiting at most window
// after it (or until quit), and keeps only those whose callers are still
// waiting. With no window it takes only what is queued already.
func Collect[R Request](first R, queue <-chan R, quit <-chan struct{}, window time.Duration, max int) []R {
	batch := []R{first}
	if window <= 0 {
	drain:
		for len(batch) < max {
			select {
			case r := <-queue:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		return slices.DeleteFunc(batch, func(r R) bool { return !r.GroupTicket().Take() })
	}
	timer := time.NewTimer(window)
	defer timer.Stop()
gather:
	for len(batch) < max {
		select {
		case r := <-queue:
			batch = append(batch, r)
		case <-timer.C:
			break gather
		case <-quit:
			break gather
		}
	}
	return slices.DeleteFunc(batch, func(r R) bool { return !r.GroupTicket().Take() })
}

// Drain answers every request still queued with fail, for a batcher that is
// shutting down.
func Drain[R Request](queue <-chan R, fail func(R)) {
	for {
		select {
		case r := <-queue:
			if r.GroupTicket().Take() {
				fail(r)
			}
		default:
			return
		}
	}
}

// Queue is group commit's front, the same for every store: callers Submit
// writes, and one goroutine gathers them into batches (Collect) and hands
// each non-empty batch to the store's flush.
type Queue[R Request] struct {
	window time.Duration
	max    int
	// eager is groupcommit.Config.Eager; lone is set while a write goes
	// alone (see Alone).
	eager  bool
	lone   atomic.Bool
	queue  chan R
	quit   chan struct{}
	done   chan struct{}
	flush  func([]R)
	closed func(R)
}

// Start starts a queue for cfg, which is on and defaulted. flush runs on the
// queue's goroutine, one batch at a time (a store that runs batches
// concurrently starts its own goroutine there); closed answers a request
// that is still queued when the queue stops.
func Start[R Request](cfg groupcommit.Config, flush func([]R), closed func(R)) *Queue[R] {
	q := &Queue[R]{
		window: cfg.Window, max: cfg.MaxSize, eager: cfg.Eager,
		queue: make(chan R, cfg.MaxSize),
		quit:  make(chan struct{}), done: make(chan struct{}),
		flush: flush, closed: closed,
	}
	go q.loop()
	return q
}

func (q *Queue[R]) loop() {
	defer close(q.done)
	for {
		select {
		case r := <-q.queue:
			if batch := Collect(r, q.queue, q.quit, q.window, q.max); len(batch) > 0 {
				q.flush(batch)
			}
		case <-q.quit:
			Drain(q.queue, q.closed)
			return
		}
	}
}

// Len is how many requests are queued and not yet gathered into a batch.
func (q *Queue[R]) Len() int { return len(q.queue) }

// Alone reports whether a write may skip the queue and run as it would
// with group commit off: the queue is eager (no window), nothing is
// queued, idle says the store is writing no batch, and no other write has
// gone alone — it would make a batch of one, and going alone spares it the
// hand-offs to the queue's goroutine and back. One write at a time goes
// alone, so under load the others queue and share commits. The caller
// calls EndAlone when its write has returned. Either way the store's
// statements decide the same.
func (q *Queue[R]) Alone(idle bool) bool {
	return q.eager && idle && len(q.queue) == 0 && q.lone.CompareAndSwap(false, true)
}

// EndAlone ends the write Alone let through.
func (q *Queue[R]) EndAlone() { q.lone.Store(false) }

// Stop ends the queue once the flush in progress has returned; requests
// still queued are answered with closed.
func (q *Queue[R]) Stop() {
	close(q.quit)
	<-q.done
}

// Submit queues r and waits for its answer on done, which the store's flush
// (or the queue's closed) sends once the batch holding r has committed. If
// ctx ends first it returns canceled(ctx.Err()), and if the queue stops
// first, stopped(); a request already taken into a batch may still be
// written then, which the caller's retry recognises as its own attempt.
func Submit[R Request, A any](ctx context.Context, q *Queue[R], r R, done <-chan A, canceled func(error) A, stopped func() A) A {
	select {
	case q.queue <- r:
	case <-ctx.Done():
		return canceled(ctx.Err())
	case <-q.quit:
		return stopped()
	}
	select {
	case a := <-done:
		return a
	case <-ctx.Done():
		r.GroupTicket().Abandon()
		return canceled(ctx.Err())
	case <-q.quit:
		if r.GroupTicket().Abandon() {
			return stopped()
		}
		return <-done
	}
}
