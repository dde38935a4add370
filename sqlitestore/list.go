package sqlitestore

import (
	"context"
	"strings"

	"github.com/idemkit/idem"
)

// list orders by (created_at, scope, key), the order of ListFilter.After;
// the cursor is a row-value comparison so a page never repeats or skips a
// record created in the same microsecond.
func (o ops) list(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
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
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q += ` ORDER BY created_at, scope, key`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return o.queryRecords(ctx, q, args...)
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

// sweep deletes expired succeeded/failed records in one statement. The
// rowid subquery bounds the batch; the outer conditions repeat the filter
// so the decision and the delete are the same statement's. p.Limit <= 0
// means no limit.
func (o ops) sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	now := p.Now.UnixMicro()
	res, err := o.write.ExecContext(ctx, `
		DELETE FROM idem_records
		WHERE state IN ('succeeded', 'failed') AND expires_at <= ?
			AND rowid IN (
				SELECT rowid FROM idem_records
				WHERE state IN ('succeeded', 'failed') AND expires_at <= ?
				ORDER BY expires_at LIMIT ?)`,
		now, now, limit)
	n, err := affected(res, err)
	return int(n), err
}
