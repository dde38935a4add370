package sqlitestore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/commitqueue"
)

// flushTimeout bounds one batch on the writer. Callers do not wait for it:
// each leaves when its own ctx ends.
const flushTimeout = 30 * time.Second

// batchReq is one write waiting for the writer. run does the whole
// operation on the batch's transaction and keeps its answer in variables
// of the caller's; the caller reads them only after done delivers.
type batchReq struct {
	run    func(ctx context.Context, o ops) error
	ticket commitqueue.Ticket
	done   chan error // buffered: the writer never blocks on it
}

// batcher is group commit on the single writer connection: one goroutine
// takes the claims and finishes that arrive within a window and runs them
// in one BEGIN IMMEDIATE … COMMIT, so with Synchronous FULL the whole batch
// costs one fsync. Each request runs exactly the statements it would run
// alone (the primary key still decides every claim), inside its own
// SAVEPOINT: a failing statement is rolled back to that savepoint and
// fails only its own caller. Callers are answered after COMMIT returns; if
// COMMIT fails, every caller in the batch gets the error (none was
// acknowledged). Reads, the replay check of Claim included, never enter a
// batch.
type batcher struct {
	s *Store
	q *commitqueue.Queue[*batchReq]
	// flushing is set while a batch is being written (see alone).
	flushing atomic.Bool
	// submitted counts the writes that went through the queue (for tests).
	submitted atomic.Int64
}

func newBatcher(s *Store, b Batch) *batcher {
	bt := &batcher{s: s}
	bt.q = commitqueue.Start(b, bt.flush, func(r *batchReq) { r.done <- idem.ErrClosed })
	return bt
}

// alone reports whether a write may skip the batcher: without a window, a
// write that finds nothing queued, no batch being written and no other
// write gone alone would make a batch of one, so it runs as it would with
// group commit off — its statements in their own transaction on the
// writer, without the hand-off to the batcher's goroutine and the
// savepoint (a lone caller measured 0.81× raw through the batcher). The
// caller calls endAlone when it is done. The writer is one connection, so
// a batch that starts meanwhile waits for it; under load the others queue
// and share commits. Either way the statements decide the same.
func (b *batcher) alone() bool { return b.q.Alone(!b.flushing.Load()) }

func (b *batcher) endAlone() { b.q.EndAlone() }

// stop ends the batcher after the batch in progress; requests still queued
// get ErrClosed.
func (b *batcher) stop() { b.q.Stop() }

// submit queues run and waits until its batch has committed.
func (b *batcher) submit(ctx context.Context, run func(ctx context.Context, o ops) error) error {
	r := &batchReq{run: run, done: make(chan error, 1)}
	b.submitted.Add(1)
	return commitqueue.Submit(ctx, b.q, r, r.done, func(err error) error { return err }, func() error { return idem.ErrClosed })
}

// GroupTicket implements commitqueue.Request.
func (r *batchReq) GroupTicket() *commitqueue.Ticket { return &r.ticket }

// flush runs one batch in one transaction and answers every request.
func (b *batcher) flush(batch []*batchReq) {
	b.flushing.Store(true)
	defer b.flushing.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	tx, err := b.s.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see writerDSN)
	if err != nil {
		answerAll(batch, err)
		return
	}
	q := &txQuerier{tx: tx, c: b.s.wq, missed: map[string]bool{}}
	defer q.prepareMissed(ctx)
	o := ops{read: q, write: q}
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i], err = runInSavepoint(ctx, q, o, r)
		if err != nil {
			// The savepoint could not be rolled back: SQLite has abandoned
			// the transaction, so nothing in it is kept.
			_ = tx.Rollback()
			answerAll(batch, err)
			return
		}
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	if err := tx.Commit(); err != nil {
		answerAll(batch, err)
		return
	}
	for i, r := range batch {
		r.done <- errs[i]
	}
}

// runInSavepoint runs r inside a savepoint. opErr is r's own failure, whose
// writes were rolled back; txErr means the transaction itself is lost.
func runInSavepoint(ctx context.Context, q querier, o ops, r *batchReq) (opErr, txErr error) {
	if _, err := q.ExecContext(ctx, "SAVEPOINT req"); err != nil {
		return nil, err
	}
	if opErr = r.run(ctx, o); opErr != nil {
		if _, err := q.ExecContext(ctx, "ROLLBACK TO req"); err != nil {
			return opErr, errors.Join(opErr, err)
		}
	}
	_, txErr = q.ExecContext(ctx, "RELEASE req")
	return opErr, txErr
}

// beforeCommit, set only by the crash test's child process, widens the
// window between a batch's statements and its COMMIT, where a process
// that answered too early would lose acknowledged claims when killed.
var beforeCommit func()

func answerAll(batch []*batchReq, err error) {
	for _, r := range batch {
		r.done <- err
	}
}
