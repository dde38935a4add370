package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/idemkit/idem"
)

// list orders by (created_at, scope, key), the order of ListFilter.After;
// the cursor is a row-value comparison so a page never repeats or skips a
// record created in the same microsecond.
func (o ops) list(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	q, args := listQuery(f)
	return o.queryRecords(ctx, q, args...)
}

// listQuery is list's statement: only the conditions f uses.
func listQuery(f idem.ListFilter) (string, []any) {
	var (
		conds []string
		args  []any
	)
	if f.Scope != "" {
		conds, args = append(conds, `scope = ?`), append(args, f.Scope)
	}
	if len(f.States) > 0 {
		marks := make([]string, len(f.States))
		for i, st := range f.States {
			marks[i] = "?"
			args = append(args, string(st))
		}
		conds = append(conds, `state IN (`+strings.Join(marks, ", ")+`)`)
	}
	if !f.CreatedBefore.IsZero() {
		conds, args = append(conds, `created_at < ?`), append(args, f.CreatedBefore.UnixMicro())
	}
	if c := f.After; c != nil {
		conds = append(conds, `(created_at, scope, key) > (?, ?, ?)`)
		args = append(args, c.CreatedAt.UnixMicro(), c.Scope, c.Key)
	}
	q := `SELECT ` + columns + ` FROM idem_records`
	if len(f.States) == 1 {
		// One state: walk its (state, created_at) slice of the index in
		// order. ANALYZE sees few distinct states and would rather scan
		// (created_at, scope, key) in order and filter, which reads the
		// whole table when the state is rare (unknown, in_progress) — a
		// second for the first page of a million records.
		q += ` INDEXED BY idem_records_state_created`
	}
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q += ` ORDER BY created_at, scope, key`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return q, args
}

func (o ops) queryRecords(ctx context.Context, q string, args ...any) ([]idem.Record, error) {
	rows, err := o.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []idem.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// sweepQuery deletes a batch of expired succeeded/failed records. The
// rowid subquery picks the batch from the sweep index (INDEXED BY: left to
// itself, the planner took the (state, created_at) index for both the
// subquery and the DELETE, which then read every terminal record and
// sorted them on each batch — a sweep of a million expired records ran at
// ~1,300 a second); the outer conditions repeat the filter, with unary +
// so that they are checked on the rows found by rowid rather than used to
// search, and the decision and the delete are the same statement's.
const sweepQuery = `
		DELETE FROM idem_records
		WHERE +state IN ('succeeded', 'failed') AND +expires_at <= ?
			AND rowid IN (
				SELECT rowid FROM idem_records INDEXED BY idem_records_sweep
				WHERE state IN ('succeeded', 'failed') AND expires_at <= ?
				ORDER BY expires_at LIMIT ?)`

// sweep deletes expired succeeded/failed records in one statement
// (sweepQuery). p.Limit <= 0 means no limit.
func (o ops) sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	now := p.Now.UnixMicro()
	res, err := o.write.ExecContext(ctx, sweepQuery, now, now, limit)
	n, err := affected(res, err)
	return int(n), err
}

// getQuery reads a record by its key. It selects neither scope nor key:
// the primary key compares them byte for byte (BINARY collation), so the
// row's are the caller's, and reading them back would only cost two more
// columns and two strings on every replay.
const getQuery = `SELECT fingerprint, state, fence, attempt_id, intent, result, mark,
	created_at, lease_until, completed_at, expires_at
	FROM idem_records WHERE scope = ? AND key = ?`

// getScan is what get allocates: the record it returns and the
// destinations of its scan.
type getScan struct {
	r  idem.Record
	t  scanTemps
	fp sql.RawBytes
}

// get reads the record at (scope, key); ErrNotFound when there is none.
func (o ops) get(ctx context.Context, q querier, scope, key string) (*idem.Record, error) {
	rows, err := q.QueryContext(ctx, getQuery, scope, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, notFound(scope, key)
	}
	// One allocation holds the record and the scan's temporaries; the
	// fingerprint is copied into the record's array, so the driver's bytes
	// are borrowed (until Close) rather than cloned.
	g := &getScan{r: idem.Record{Scope: scope, Key: key}}
	r, t := &g.r, &g.t
	err = rows.Scan(&g.fp, &t.state, &r.Fence, &r.AttemptID, &r.Intent, &r.Result,
		&t.mark, &t.created, &t.lease, &t.completed, &t.expires)
	if err != nil {
		return nil, err
	}
	copy(r.Fingerprint[:], g.fp)
	g.fp = nil
	t.fill(r)
	return r, rows.Close()
}
