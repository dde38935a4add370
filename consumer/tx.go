package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Beginner opens the transactions that a transactional [Processor] shares
// between the claim, the effect and the record.
type Beginner[T any] interface {
	// Begin starts a transaction.
	Begin(ctx context.Context) (T, error)
	// Store returns the store's transaction twin bound to tx (for example
	// sqlitestore's WithTx or pgstore's WithTx).
	Store(tx T) idem.Store
	// Commit commits tx.
	Commit(ctx context.Context, tx T) error
	// Rollback rolls tx back; rolling back a finished transaction is not an
	// error worth reporting.
	Rollback(ctx context.Context, tx T) error
}

// TxHandler performs a message's effect inside tx. Its writes commit
// together with the record, or not at all.
type TxHandler[T any] func(ctx context.Context, tx T, m *Message) error

// TxFuncs adapts four functions to [Beginner], for drivers other than
// database/sql (pgx: Begin is pool.Begin, Commit is tx.Commit, …).
type TxFuncs[T any] struct {
	BeginFunc    func(ctx context.Context) (T, error)
	StoreFunc    func(tx T) idem.Store
	CommitFunc   func(ctx context.Context, tx T) error
	RollbackFunc func(ctx context.Context, tx T) error
}

// Begin calls BeginFunc.
func (f TxFuncs[T]) Begin(ctx context.Context) (T, error) { return f.BeginFunc(ctx) }

// Store calls StoreFunc.
func (f TxFuncs[T]) Store(tx T) idem.Store { return f.StoreFunc(tx) }

// Commit calls CommitFunc.
func (f TxFuncs[T]) Commit(ctx context.Context, tx T) error { return f.CommitFunc(ctx, tx) }

// Rollback calls RollbackFunc.
func (f TxFuncs[T]) Rollback(ctx context.Context, tx T) error { return f.RollbackFunc(ctx, tx) }

// SQL returns a [Beginner] over database/sql: transactions are begun on db
// and bind returns the store's twin (for sqlitestore: db is Store.DB() and
// bind is func(tx *sql.Tx) idem.Store { return st.WithTx(tx) }).
func SQL(db *sql.DB, bind func(*sql.Tx) idem.Store) Beginner[*sql.Tx] {
	return TxFuncs[*sql.Tx]{
		BeginFunc:    func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, nil) },
		StoreFunc:    bind,
		CommitFunc:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		RollbackFunc: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
	}
}

// txLease is the lease of a transactional claim. Nobody else can see the
// claim before the commit, so the lease only has to keep the engine from
// heartbeating through the caller's transaction (a pgx.Tx is not safe for
// concurrent use) while the effect runs.
const txLease = time.Hour

// NewTx returns a processor whose claim, effect and record commit in one
// transaction: true exactly-once for an effect that is a write to the same
// database as the store. cfg.Engine must be an engine over the store whose
// twin b.Store returns; the transaction-bound engine is derived from it.
//
// Outcomes: success → the commit makes effect and record durable together
// (a failed commit leaves neither and the message is retried). Any handler
// error rolls the effect back, so nothing happened: a plain error is then
// recorded failed in a transaction of its own and dead-lettered; a release,
// an unknown, a timeout or a panic is retried, and recorded failed at
// MaxDeliveries. A process killed before the commit leaves no claim: the
// redelivery runs the effect once.
func NewTx[T any](cfg Config, b Beginner[T], h TxHandler[T]) (*Processor, error) {
	if b == nil || h == nil {
		return nil, errors.New("consumer: NewTx: beginner and handler are required")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	cfg.Policy.Lease = txLease
	p := &Processor{cfg: cfg}
	p.run = func(ctx context.Context, req idem.Request, m *Message) (idem.Result, error) {
		return runTx(ctx, p, b, h, req, m)
	}
	return p, nil
}

func runTx[T any](ctx context.Context, p *Processor, b Beginner[T], h TxHandler[T], req idem.Request, m *Message) (idem.Result, error) {
	tx, err := b.Begin(ctx)
	if err != nil {
		return idem.Result{}, &idem.StoreError{Op: "begin", Err: err}
	}
	open := true
	defer func() {
		if open {
			_ = b.Rollback(context.WithoutCancel(ctx), tx)
		}
	}()
	var herr error
	ran := false
	res, err := p.cfg.Engine.WithStore(b.Store(tx)).DoBytes(ctx, req, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
		ran = true
		herr = callTx(ctx, h, tx, m)
		return nil, herr
	})
	if err == nil && !res.Replayed {
		open = false
		if cerr := b.Commit(ctx, tx); cerr != nil {
			_ = b.Rollback(context.WithoutCancel(ctx), tx)
			return idem.Result{}, &idem.StoreError{Op: "commit", Err: cerr}
		}
		return res, nil
	}
	open = false
	_ = b.Rollback(context.WithoutCancel(ctx), tx)
	if !ran || herr == nil {
		return res, err // a replay, a mismatch, in flight, or a store failure
	}
	// The effect's writes were rolled back with the claim: nothing happened.
	if !errors.As(herr, new(*handlerFailure)) {
		if !p.last(m) {
			return idem.Result{}, idem.Release(herr)
		}
		herr = giveUp(m, herr)
	}
	// Record the failure outside the rolled-back transaction, so that a
	// redelivery replays it instead of running the handler again.
	return p.cfg.Engine.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, errors.New(herr.Error())
	})
}

// handlerFailure marks a plain handler error (not released, not unknown, not
// a context error, not a panic): one to record as failed.
type handlerFailure struct{ err error }

func (f *handlerFailure) Error() string { return f.err.Error() }
func (f *handlerFailure) Unwrap() error { return f.err }

// callTx runs h and classifies its error; a panic becomes an error so the
// transaction is rolled back and the consumer keeps running.
func callTx[T any](ctx context.Context, h TxHandler[T], tx T, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = idem.Unknown(fmt.Errorf("consumer: handler panicked: %v", r))
		}
	}()
	err = h(ctx, tx, m)
	switch {
	case err == nil, errors.Is(err, idem.ErrReleased), errors.Is(err, idem.ErrUnknown),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &handlerFailure{err: err}
}
