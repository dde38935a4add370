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
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: make(map[string]*sql.Stmt)}
}

// stmt returns the prepared statement for q, or nil to run q unprepared.
func (c *stmtCache) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if len(c.m) >= maxCachedStmts {
		return nil, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.m[q] = st
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
