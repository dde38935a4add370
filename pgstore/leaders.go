package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// leaders is the eager group commit (Batch.Eager) run by its callers: no
// goroutine of its own gathers the batches. A caller that finds fewer
// than maxInFlight batches being written takes the requests waiting (its
// own first, at most txWrites) and writes them itself; otherwise it
// waits in line. A caller that has written a batch hands the next one,
// taken from the line, to the first request in it, whose caller (waiting
// for its answer) writes it, and returns its own answer: each write
// costs at most one hand-off between goroutines (its answer, or the
// batch it is to write), where a batcher goroutine costs three (the
// write to the batcher, the batch to a writer, the answer back). Batches
// and transactions are what the windowed batcher makes of the same
// writes: at most txWrites writes a transaction, at most maxInFlight at
// once.
type leaders struct {
	mu      sync.Mutex
	line    []*batchReq // waiting, first come first
	running int         // batches being written
	closed  bool
	// lone is set while a write goes alone (see alone).
	lone atomic.Bool
	// orphans counts batches whose leader's caller had left, written by
	// a goroutine of their own (for tests).
	orphans atomic.Int64
}

// alone reports whether a write may skip the group commit: nothing is
// being written or waiting, and no other write went alone (see
// batcher.alone). It is asked by every write, so it does not wait for mu:
// a lock held by another caller means the group commit is busy.
func (l *leaders) alone() bool {
	if !l.mu.TryLock() {
		return false
	}
	idle := l.running == 0 && len(l.line) == 0 && !l.closed
	l.mu.Unlock()
	return idle && l.lone.CompareAndSwap(false, true)
}

func (l *leaders) endAlone() { l.lone.Store(false) }

// take removes the next batch from the line, first (if not nil) at its
// head: requests whose callers left are dropped. Called with mu held.
func (l *leaders) take(first *batchReq, n int) []*batchReq {
	var batch []*batchReq
	if first != nil {
		batch = make([]*batchReq, 0, min(n, len(l.line)+1))
		batch = append(batch, first)
	}
	i := 0
	for ; i < len(l.line) && len(batch) < n; i++ {
		if r := l.line[i]; r.ticket.Take() {
			batch = append(batch, r)
		}
	}
	clear(l.line[:i])
	l.line = l.line[i:]
	if len(l.line) == 0 {
		l.line = l.line[:0:0] // let the old backing array go
	}
	return batch
}

// stop answers every waiting request with ErrClosed; batches being
// written finish (the batcher's flushing group waits for them).
func (l *leaders) stop() {
	l.mu.Lock()
	l.closed = true
	line := l.take(nil, len(l.line))
	l.mu.Unlock()
	answerAll(line, errClosed("batch"))
}

// submitLed writes r in the eager group commit and returns its answer.
func (b *batcher) submitLed(ctx context.Context, op string, r *batchReq) batchRes {
	l := b.led
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return batchRes{err: errClosed(op)}
	}
	if l.running < maxInFlight {
		l.running++
		b.flushing.Add(1)
		r.ticket.Take()
		batch := l.take(r, b.txWrites)
		l.mu.Unlock()
		b.lead(batch)
		return <-r.done
	}
	l.line = append(l.line, r)
	l.mu.Unlock()
	select {
	case a := <-r.done:
		if a.lead != nil {
			b.lead(a.lead)
			return <-r.done
		}
		return a
	case <-ctx.Done():
		if r.ticket.Abandon() {
			return batchRes{err: wrap(op, ctx.Err())}
		}
		// Taken into a batch: someone else's, whose writer answers r, or
		// one r's caller is to write, which must still be written (the
		// other requests in it wait for it) without keeping the caller.
		go func() {
			if a := <-r.done; a.lead != nil {
				l.orphans.Add(1)
				b.lead(a.lead)
			}
		}()
		return batchRes{err: wrap(op, ctx.Err())}
	}
}

// lead writes batch (answering every request in it), then hands the next
// batch in line to the first request in it, or, with none waiting, ends
// this batch's turn.
func (b *batcher) lead(batch []*batchReq) {
	b.flush(batch)
	l := b.led
	l.mu.Lock()
	var next []*batchReq
	if !l.closed {
		next = l.take(nil, b.txWrites)
	}
	if len(next) == 0 {
		l.running--
	}
	l.mu.Unlock()
	if len(next) == 0 {
		b.flushing.Done()
		return
	}
	next[0].done <- batchRes{lead: next}
}
