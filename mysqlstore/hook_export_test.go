package mysqlstore

import (
	"context"
	"database/sql"
)

// BeforeReclaim returns a view of s whose statements run as s's do, except
// that before runs just before each take-over of an expired record (the
// reclaim UPDATE) is sent: a test's way into the gap between a claim's
// read of the record and its write, and of counting take-overs.
func (s *Store) BeforeReclaim(before func()) *Store {
	c := *s
	c.q = &hookQuerier{querier: s.q, stmt: s.sql.reclaim, before: before}
	return &c
}

type hookQuerier struct {
	querier
	stmt   string
	before func()
}

func (h *hookQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if query == h.stmt {
		h.before()
	}
	return h.querier.ExecContext(ctx, query, args...)
}
