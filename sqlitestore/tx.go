package sqlitestore

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// WithTx returns the transaction twin of s: every operation runs inside
// tx, reads included (so it sees the transaction's own writes), and commits
// or rolls back with it. Claim a key, write the local effect, Finish, then
// commit: the effect and its record become durable together, or not at all.
//
// tx must have been begun on [Store.DB], the writer; a transaction on
// another *sql.DB would write a different file or none. Because the writer
// has one connection, calling s's write methods while the transaction is
// open waits for the transaction to end: do all of the transaction's work
// through the returned store.
//
// The returned store is used by one goroutine at a time, like the *sql.Tx
// it wraps. Commit or roll back tx yourself: its Close does neither, and
// only makes its later calls return [idem.ErrClosed].
func (s *Store) WithTx(tx *sql.Tx) idem.Store { return &txStore{parent: s, tx: tx} }

// txStore is what WithTx returns.
type txStore struct {
	parent *Store
	tx     *sql.Tx
	closed atomic.Bool
}

func (t *txStore) ops() (ops, error) {
	if t.closed.Load() || t.parent.closed.Load() {
		return ops{}, idem.ErrClosed
	}
	return ops{read: t.tx, write: t.tx, brokenClaim: t.parent.brokenClaim}, nil
}

// Claim implements [idem.Store] inside the transaction.
func (t *txStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	o, err := t.ops()
	if err != nil {
		return idem.ClaimResult{}, err
	}
	r, err := o.claim(ctx, p)
	return r, t.parent.wrap("claim", err)
}

// Finish implements [idem.Store] inside the transaction.
func (t *txStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.finish(ctx, p)
	return r, t.parent.wrap("finish", err)
}

// Release implements [idem.Store] inside the transaction.
func (t *txStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("release", o.release(ctx, p))
}

// Heartbeat implements [idem.Store] inside the transaction.
func (t *txStore) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("heartbeat", o.heartbeat(ctx, p))
}

// Resolve implements [idem.Store] inside the transaction.
func (t *txStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.resolve(ctx, p)
	return r, t.parent.wrap("resolve", err)
}

// SetMark implements [idem.Store] inside the transaction.
func (t *txStore) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("set mark", o.setMark(ctx, scope, key, fence, mark))
}

// Get implements [idem.Store] inside the transaction.
func (t *txStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.get(ctx, o.read, scope, key)
	return r, t.parent.wrap("get", err)
}

// List implements [idem.Store] inside the transaction.
func (t *txStore) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.list(ctx, f)
	return r, t.parent.wrap("list", err)
}

// Sweep implements [idem.Store] inside the transaction.
func (t *txStore) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	o, err := t.ops()
	if err != nil {
		return 0, err
	}
	n, err := o.sweep(ctx, p)
	return n, t.parent.wrap("sweep", err)
}

// Close makes later calls on t return [idem.ErrClosed]. It neither commits
// nor rolls back the transaction.
func (t *txStore) Close() error {
	t.closed.Store(true)
	return nil
}
