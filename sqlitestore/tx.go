package sqlitestore

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// TxStore is the transaction twin of [Store]: every operation runs inside
// the caller's transaction, reads included (so it sees the transaction's own
// writes), and commits or rolls back with it. Claim a key, write the local
// effect, Finish, then commit: the effect and its record become durable
// together, or not at all.
//
// The transaction must have been begun on [Store.DB], the writer; a
// transaction on another *sql.DB would write a different file or none.
// Because the writer has one connection, calling the parent Store's write
// methods while the transaction is open waits for the transaction to end:
// do all of the transaction's work through the TxStore.
//
// A TxStore is used by one goroutine at a time, like the *sql.Tx it wraps.
type TxStore struct {
	parent *Store
	tx     *sql.Tx
	closed atomic.Bool
}

var _ idem.Store = (*TxStore)(nil)

// WithTx returns a store that runs its operations in tx, which must be a
// transaction on s.DB(). Commit or roll back tx yourself; TxStore.Close
// does neither.
func (s *Store) WithTx(tx *sql.Tx) *TxStore { return &TxStore{parent: s, tx: tx} }

func (t *TxStore) ops() (ops, error) {
	if t.closed.Load() || t.parent.closed.Load() {
		return ops{}, idem.ErrClosed
	}
	return ops{read: t.tx, write: t.tx, brokenClaim: t.parent.brokenClaim}, nil
}

// Claim implements [idem.Store] inside the transaction.
func (t *TxStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	o, err := t.ops()
	if err != nil {
		return idem.ClaimResult{}, err
	}
	r, err := o.claim(ctx, p)
	return r, t.parent.wrap("claim", err)
}

// Finish implements [idem.Store] inside the transaction.
func (t *TxStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.finish(ctx, p)
	return r, t.parent.wrap("finish", err)
}

// Release implements [idem.Store] inside the transaction.
func (t *TxStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("release", o.release(ctx, p))
}

// Heartbeat implements [idem.Store] inside the transaction.
func (t *TxStore) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("heartbeat", o.heartbeat(ctx, p))
}

// Resolve implements [idem.Store] inside the transaction.
func (t *TxStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.resolve(ctx, p)
	return r, t.parent.wrap("resolve", err)
}

// SetMark implements [idem.Store] inside the transaction.
func (t *TxStore) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	o, err := t.ops()
	if err != nil {
		return err
	}
	return t.parent.wrap("set mark", o.setMark(ctx, scope, key, fence, mark))
}

// Get implements [idem.Store] inside the transaction.
func (t *TxStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.get(ctx, o.read, scope, key)
	return r, t.parent.wrap("get", err)
}

// List implements [idem.Store] inside the transaction.
func (t *TxStore) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	o, err := t.ops()
	if err != nil {
		return nil, err
	}
	r, err := o.list(ctx, f)
	return r, t.parent.wrap("list", err)
}

// Sweep implements [idem.Store] inside the transaction.
func (t *TxStore) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	o, err := t.ops()
	if err != nil {
		return 0, err
	}
	n, err := o.sweep(ctx, p)
	return n, t.parent.wrap("sweep", err)
}

// Close makes later calls on t return [idem.ErrClosed]. It neither commits
// nor rolls back the transaction.
func (t *TxStore) Close() error {
	t.closed.Store(true)
	return nil
}
