package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the cache: the fixed statements fit many times
// over, while List (whose text depends on its filter) cannot grow it without
// bound; past the cap statements run unprepared.
const maxCachedStmts = 64

// stmtCache is a querier over a *sql.DB that prepares each statement text
// once. Parsing dominates the CPU cost of SQLite's small statements, so the
// hot path (claim, replay read, finish) runs prepared statements. It is not
// used inside a caller's transaction: preparing on the pool would wait for
// the writer connection that transaction holds.
type stmtCache struct {
	db *sql.DB
	// ready maps a statement text to its *sql.Stmt: read on every call
	// without a lock, which many concurrent callers would contend on.
	ready sync.Map
	// mu serialises preparing; n counts the prepared statements.
	mu sync.Mutex
	n  int
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db}
}

// stmt returns the prepared statement for q, or nil to run q unprepared.
func (c *stmtCache) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st := c.peek(q); st != nil {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.peek(q); st != nil {
		return st, nil
	}
	if c.n >= maxCachedStmts {
		return nil, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.ready.Store(q, st)
	c.n++
	return st, nil
}

func (c *stmtCache) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, q)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		return c.db.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (c *stmtCache) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, q)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		return c.db.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (c *stmtCache) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, q)
	if err != nil || st == nil {
		// An unprepared run reports a preparation error through the Row.
		return c.db.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// peek returns the prepared statement for q if there is one, without
// preparing it (which would need a connection of its own).
func (c *stmtCache) peek(q string) *sql.Stmt {
	if st, ok := c.ready.Load(q); ok {
		return st.(*sql.Stmt)
	}
	return nil
}

// txQuerier runs statements in tx, reusing c's prepared statements (tx is
// on c's one writer connection, where they were prepared). It cannot
// prepare inside the transaction, so it runs a statement it has not seen
// unprepared and remembers it; prepareMissed prepares those afterwards.
type txQuerier struct {
	tx     *sql.Tx
	c      *stmtCache
	missed map[string]bool
}

func (q *txQuerier) stmt(ctx context.Context, s string) *sql.Stmt {
	if st := q.c.peek(s); st != nil {
		return q.tx.StmtContext(ctx, st)
	}
	q.missed[s] = true
	return nil
}

func (q *txQuerier) ExecContext(ctx context.Context, s string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, s); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, s, args...)
}

func (q *txQuerier) QueryContext(ctx context.Context, s string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, s); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, s, args...)
}

func (q *txQuerier) QueryRowContext(ctx context.Context, s string, args ...any) *sql.Row {
	if st := q.stmt(ctx, s); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, s, args...)
}

// prepareMissed prepares the statements q ran unprepared; call it once the
// transaction has ended.
func (q *txQuerier) prepareMissed(ctx context.Context) {
	for s := range q.missed {
		_, _ = q.c.stmt(ctx, s) // best effort: an unprepared statement still runs
	}
	clear(q.missed)
}
