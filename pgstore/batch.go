package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/commitqueue"
)

// flushTimeout bounds one batch's round trips and commit. With a window,
// callers do not wait for it: each leaves when its own ctx ends. In the
// eager group commit a caller writes the batch it leads, so a batch ends
// by the latest deadline among its requests (every store call has one,
// Config.CallTimeout), and its writer waits no longer than that.
const flushTimeout = 30 * time.Second

// batchReq is one write waiting for a batch: a statement returning the
// record columns and one boolean (claim: claimed; finish: notified), or,
// with exec, a statement returning no rows (finishKnown), whose answer is
// whether it changed one.
type batchReq struct {
	scope, key string
	sql        string
	args       []any
	exec       bool
	deadline   time.Time // the caller's, zero if none
	ticket     commitqueue.Ticket
	done       chan batchRes // buffered: the batcher never blocks on it
}

// batchRes is the answer to a batchReq, sent after the commit returned.
type batchRes struct {
	rec   idem.Record
	flag  bool
	found bool // the statement returned a row (exec: changed one)
	err   error
	// lead, instead of an answer, hands the receiving caller a batch to
	// write (eager group commit; the batch holds its own request).
	lead []*batchReq
}

// maxInFlight is how many batches may be on the wire at once, each on its
// own connection: while one waits for its commit's WAL flush, the next
// one gathers and runs.
const maxInFlight = 4

// maxTxWrites caps the writes in one batch transaction; a gathered batch
// of more (up to Batch.MaxSize) is split into transactions of at most this
// many, run at once on up to maxInFlight connections. It keeps outcome
// UPDATEs HOT. The rows one transaction inserts land together on its
// connection's current heap page, and each grows by its result when it is
// finished; a page filled to the fillfactor by rows still in progress has
// room for the finished versions of only three or four of them (a tenth of
// 8 KiB, ~220 B more a row), and within one transaction PostgreSQL cannot
// prune the old versions it replaced. Measured with idem bench at
// batch_size=32 (docs/performance.md): one transaction for the whole batch
// left 47 % of updates HOT with outcomes batched, 77–82 % with only claims
// batched; transactions of four left 96–97 % HOT (claims batched) at
// 1.2–1.4 times the raw INSERT + UPDATE.
const maxTxWrites = 4

// batcher is group commit: with a window, one goroutine gathers the
// claims (and, with Config.BatchFinishes, the finishes) that arrive within
// it; eager (Batch.Eager), the callers gather and write the batches
// themselves (see leaders). Each
// batch runs as transactions of at most maxTxWrites writes, each in one
// pipelined round trip: the statements and one Sync, which PostgreSQL runs
// as one implicit transaction committed at the Sync (no BEGIN and COMMIT
// statements: two fewer a batch, measured at 3.2 statements a first-time
// request at 16 callers with them). Statements run in
// (scope, key) order, so two batches, from this process or another, lock
// rows in the same order and cannot deadlock each other. Up to
// maxInFlight transactions run at once.
//
// In a pipeline, PostgreSQL skips everything after a failed statement up
// to the Sync and rolls the implicit transaction back: a batch commits only
// if all of its statements succeeded.
//
// Batching never changes what a statement decides: the claim is still the
// INSERT … ON CONFLICT DO NOTHING decided by the primary key, an outcome
// still the fenced UPDATE. Neither raises an error on a conflict, so
// normally no request can fail its neighbours; if one does fail (which
// aborts the transaction), the batch is rolled back and every request is
// run again on its own, each caller getting its own answer. If the commit
// fails or is not confirmed, every caller gets the error: none was
// acknowledged.
type batcher struct {
	pool *pgxpool.Pool
	q    *commitqueue.Queue[*batchReq] // with a window; nil when eager
	// sem holds a token per batch in flight; flushing counts them for stop.
	sem      chan struct{}
	flushing sync.WaitGroup
	// fallbacks counts batches rolled back and run request by request.
	fallbacks atomic.Int64
	// txWrites caps the writes in one transaction (maxTxWrites).
	txWrites int
	// submitted counts the writes queued, largestTx the most writes one
	// transaction held (for tests).
	submitted, largestTx atomic.Int64
	// st is set when claims are replicated: each batch's commit must then
	// be confirmed by the standbys (see Store.onSyncConn).
	st *Store
	// led is the eager group commit, whose batches its callers write;
	// nil with a window, where q's goroutine gathers them.
	led *leaders
}

func newBatcher(pool *pgxpool.Pool, b Batch, st *Store) *batcher {
	bt := &batcher{pool: pool, sem: make(chan struct{}, maxInFlight), txWrites: maxTxWrites}
	if st.replicated() {
		bt.st = st
	}
	if b.Eager {
		// A batch is one transaction here: MaxSize, if smaller, caps it.
		bt.txWrites = min(bt.txWrites, max(b.MaxSize, 1))
		bt.led = &leaders{}
		return bt
	}
	bt.q = commitqueue.Start(b, bt.start, func(r *batchReq) { r.done <- batchRes{err: errClosed("batch")} })
	return bt
}

// alone reports whether a write may skip the batcher: eager (no window),
// a write that finds nothing waiting, no batch being written and no other
// write gone alone would make a batch of one, so it goes out as a plain
// statement instead (for a claim the first-time insert: no BEGIN and
// COMMIT, no hand-offs). The caller calls endAlone when its statement
// has returned. One write at a time goes alone, so under load the others
// queue and share transactions. Either way the statement decides the same.
// With a window no write goes alone.
func (b *batcher) alone() bool { return b.led != nil && b.led.alone() }

// endAlone ends the write alone let through.
func (b *batcher) endAlone() { b.led.endAlone() }

// stop ends the batcher after the batches in flight; requests still queued
// get ErrClosed.
func (b *batcher) stop() {
	if b.led != nil {
		b.led.stop()
	} else {
		b.q.Stop()
	}
	b.flushing.Wait()
}

// submit queues one statement and waits for its answer.
func (b *batcher) submit(ctx context.Context, op, scope, key, sql string, args []any) batchRes {
	return b.submitReq(ctx, op, &batchReq{scope: scope, key: key, sql: sql, args: args, done: make(chan batchRes, 1)})
}

// submitExec queues one statement that returns no rows and waits for its
// answer: found when it changed exactly one row.
func (b *batcher) submitExec(ctx context.Context, op, scope, key, sql string, args []any) batchRes {
	return b.submitReq(ctx, op, &batchReq{scope: scope, key: key, sql: sql, args: args, exec: true, done: make(chan batchRes, 1)})
}

func (b *batcher) submitReq(ctx context.Context, op string, r *batchReq) batchRes {
	b.submitted.Add(1)
	if b.led != nil {
		r.deadline, _ = ctx.Deadline()
		return b.submitLed(ctx, op, r)
	}
	return commitqueue.Submit(ctx, b.q, r, r.done,
		func(err error) batchRes { return batchRes{err: wrap(op, err)} },
		func() batchRes { return batchRes{err: errClosed(op)} })
}

// start splits batch into transactions of at most txWrites writes and
// flushes each on a goroutine of its own once fewer than maxInFlight are
// on the wire.
func (b *batcher) start(batch []*batchReq) {
	for len(batch) > 0 {
		n := min(len(batch), b.txWrites)
		tx := batch[:n:n]
		batch = batch[n:]
		b.sem <- struct{}{}
		b.flushing.Add(1)
		go func() {
			defer b.flushing.Done()
			b.flush(tx)
			<-b.sem
		}()
	}
}

// latestDeadline is the latest of the requests' deadlines, or limit if
// one has none or a later one.
func latestDeadline(batch []*batchReq, limit time.Time) time.Time {
	var latest time.Time
	for _, r := range batch {
		if r.deadline.IsZero() {
			return limit
		}
		if r.deadline.After(latest) {
			latest = r.deadline
		}
	}
	if latest.IsZero() || latest.After(limit) {
		return limit
	}
	return latest
}

// GroupTicket implements commitqueue.Request.
func (r *batchReq) GroupTicket() *commitqueue.Ticket { return &r.ticket }

// flush runs one batch and answers every request in it.
func (b *batcher) flush(batch []*batchReq) {
	until := time.Now().Add(flushTimeout)
	if b.led != nil {
		until = latestDeadline(batch, until)
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	slices.SortFunc(batch, func(x, y *batchReq) int {
		return cmp.Or(cmp.Compare(x.scope, y.scope), cmp.Compare(x.key, y.key))
	})
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		answerAll(batch, wrap("batch", err))
		return
	}
	defer conn.Release()
	for n := int64(len(batch)); ; {
		if cur := b.largestTx.Load(); cur >= n || b.largestTx.CompareAndSwap(cur, n) {
			break
		}
	}
	if b.st == nil {
		answer(batch, b.write(ctx, conn, batch))
		return
	}
	// Replicated claims: the batch's commit waits for the standbys, and
	// a wait that was interrupted or cancelled fails every request in it
	// (none is used); the connection is closed (see Store.onSyncConn).
	pgc := conn.Conn().PgConn()
	takeNotices(pgc)
	wctx, wcancel := context.WithTimeout(ctx, b.st.cfg.ReplicatedClaimTimeout)
	results := b.write(wctx, conn, batch)
	interrupted := wctx.Err() != nil
	wcancel()
	if cancelled := takeNotices(pgc)&noticeSyncRepCancelled != 0; interrupted || cancelled {
		closeConn(pgc)
		answerAll(batch, wrap("batch commit", b.st.syncFailure(interrupted, cancelled, nil)))
		return
	}
	answer(batch, results)
}

// write runs one batch on conn and returns every request's answer.
func (b *batcher) write(ctx context.Context, conn *pgxpool.Conn, batch []*batchReq) []batchRes {
	results, err := runBatch(ctx, conn, batch)
	switch {
	case err == nil:
		return results
	case errors.Is(err, errCommit):
		return same(len(batch), wrap("batch commit", err))
	}
	// A statement failed and the implicit transaction was rolled back at
	// the Sync: nothing was written. Run each request alone so only its
	// own caller sees the failure. (A connection left inside a transaction
	// — it cannot be, the batch has no BEGIN — is rolled back first.)
	b.fallbacks.Add(1)
	if conn.Conn().PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return same(len(batch), wrap("batch", errors.Join(err, rerr)))
		}
	}
	for i, r := range batch {
		results[i] = runOne(ctx, conn, r)
	}
	return results
}

// same returns n answers that are all err.
func same(n int, err error) []batchRes {
	out := make([]batchRes, n)
	for i := range out {
		out[i].err = err
	}
	return out
}

// answer sends each request its answer.
func answer(batch []*batchReq, results []batchRes) {
	for i, r := range batch {
		r.done <- results[i]
	}
}

// errCommit marks a batch whose statements all succeeded but whose commit
// failed or was not confirmed: its outcome is unknown.
var errCommit = errors.New("commit failed")

// runBatch sends every statement and one Sync in one pipelined round trip
// and reads their answers: one implicit transaction, committed at the Sync
// when every statement succeeded (PostgreSQL then answers the Sync, which
// Close reads, only after the commit), rolled back otherwise. An error
// wrapping errCommit means every statement succeeded but the commit is not
// confirmed; any other error means the transaction did not commit.
func runBatch(ctx context.Context, conn *pgxpool.Conn, batch []*batchReq) ([]batchRes, error) {
	var pb pgx.Batch
	for _, r := range batch {
		pb.Queue(r.sql, r.args...)
	}
	br := conn.SendBatch(ctx, &pb)
	results := make([]batchRes, len(batch))
	var err error
	for i, r := range batch {
		if r.exec {
			results[i] = execResult(br.Exec())
		} else {
			results[i] = scanResult(br.QueryRow())
		}
		if err = results[i].err; err != nil {
			break
		}
	}
	if err == nil {
		if err = br.Close(); err != nil {
			return results, fmt.Errorf("%w: %w", errCommit, err)
		}
		return results, nil
	}
	return results, errors.Join(err, br.Close())
}

// runOne runs a request's statement in its own implicit transaction.
func runOne(ctx context.Context, conn *pgxpool.Conn, r *batchReq) batchRes {
	var res batchRes
	if r.exec {
		res = execResult(conn.Exec(ctx, r.sql, r.args...))
	} else {
		res = scanResult(conn.QueryRow(ctx, r.sql, r.args...))
	}
	if res.err != nil {
		res.err = wrap("batch", res.err)
	}
	return res
}

// execResult answers an exec request: found when one row changed.
func execResult(tag pgconn.CommandTag, err error) batchRes {
	return batchRes{found: err == nil && tag.RowsAffected() == 1, err: err}
}

func scanResult(row pgx.Row) batchRes {
	var res batchRes
	res.rec, res.err = scanRecord(row, &res.flag)
	res.found = res.err == nil
	if isNoRows(res.err) {
		res.err = nil
	}
	return res
}

func answerAll(batch []*batchReq, err error) {
	for _, r := range batch {
		r.done <- batchRes{err: err}
	}
}
