package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/idemkit/idem"
)

// errMissing is readRecord's "no row".
var errMissing = errors.New("mysqlstore: no row")

// readRecord runs one of the get statements and returns the record or
// errMissing; other errors are returned untranslated.
func (s *Store) readRecord(ctx context.Context, scope, key, query string) (*idem.Record, error) {
	r, err := scanRecord(s.q.QueryRowContext(ctx, query, scope, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errMissing
	}
	return r, err
}

// decisionRead is the statement that reads a record before a conditional
// write. Outside a transaction each statement sees the latest committed
// data and the write re-checks what was read, so a plain read suffices;
// inside one, the read must lock (see WithTx).
func (s *Store) decisionRead() string {
	if s.tx != nil {
		return s.sql.getExcl
	}
	return s.sql.get
}

// duplicateRead is the statement that reads the record after a duplicate
// INSERT. Outside a transaction the INSERT waited for the winner to commit,
// so a plain read sees it; inside one, the transaction's snapshot may be
// older, and a locking read is needed to see the latest committed row.
func (s *Store) duplicateRead() string {
	if s.tx != nil {
		return s.sql.getShared
	}
	return s.sql.get
}

// exec runs a write and returns the number of rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// write runs a conditional write made after a read. done is false when
// the write should be decided again: it matched no row because the record
// changed, or it lost a deadlock outside a transaction. err is the
// translated error of a failed write.
func (s *Store) write(ctx context.Context, op, query string, args ...any) (done bool, _ error) {
	n, err := s.exec(ctx, query, args...)
	switch {
	case s.retryable(err):
		return false, nil
	case err != nil:
		return true, s.wrap(op, err)
	}
	return n > 0, nil
}

// Get implements [idem.Store.Get]. Inside a transaction it is a plain
// (snapshot) read.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return nil, err
	}
	r, err := s.readRecord(ctx, scope, key, s.sql.get)
	if errors.Is(err, errMissing) {
		return nil, notFound("get", scope, key)
	}
	if err != nil {
		return nil, s.wrap("get", err)
	}
	return r, nil
}

// List implements [idem.Store.List]. It orders by (created_at, scope, key),
// the order of the cursor, so pages never skip or repeat a record.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if f.Limit > 0 { // a page; an unbounded listing takes what it takes
		var cancel context.CancelFunc
		ctx, cancel = s.bound(ctx)
		defer cancel()
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	query, args := s.listQuery(f)
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("list", err)
	}
	defer rows.Close()
	var out []idem.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, s.wrap("list", err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list", err)
	}
	return out, nil
}

func (s *Store) listQuery(f idem.ListFilter) (string, []any) {
	var where []string
	var args []any
	if f.Scope != "" {
		where = append(where, "scope = ?")
		args = append(args, f.Scope)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, f.CreatedBefore.UnixMicro())
	}
	if c := f.After; c != nil {
		// Spelled out rather than a row comparison, which older servers
		// do not resolve with an index.
		at := c.CreatedAt.UnixMicro()
		where = append(where, "(created_at > ? OR (created_at = ? AND (scope > ? OR (scope = ? AND `key` > ?))))")
		args = append(args, at, at, c.Scope, c.Scope, c.Key)
	}
	q := s.sql.listColumns
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at, scope, `key`"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	return q, args
}

// Sweep implements [idem.Store.Sweep]: one DELETE whose WHERE clause checks
// the state and the expiry, so a record re-claimed a moment earlier (now
// in_progress, expires_at NULL) is never removed. A Limit of 0 or less means
// no limit.
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return 0, err
	}
	var n int64
	var err error
	// A deadlock victim (a claim's insert into the gap the batch reads)
	// lost the whole batch, which deletes nothing until it commits: it
	// simply runs again, as the other writes do.
	for range maxRounds {
		if p.Limit > 0 {
			n, err = s.sweepExec(ctx, s.sql.sweep, p.Now.UnixMicro(), p.Limit)
		} else {
			n, err = s.sweepExec(ctx, s.sql.sweepNoLim, p.Now.UnixMicro())
		}
		if !s.retryable(err) {
			break
		}
	}
	if err != nil {
		return 0, s.wrap("sweep", err)
	}
	return int(n), nil
}

// sweepExec runs a sweep DELETE. Outside a caller's transaction it runs
// under READ COMMITTED: under REPEATABLE READ, InnoDB's default, the
// range scan of the expires_at index takes next-key locks, and the gap
// before its first expired entry is where every new claim's index entry
// (expires_at NULL) goes — each batch held every first-time claim until
// it committed. READ COMMITTED locks only the rows it deletes, and the
// DELETE still re-reads each row's latest committed version against its
// WHERE clause, so a record re-claimed meanwhile is left alone. Under
// binlog_format=STATEMENT, which refuses that, it runs as before.
func (s *Store) sweepExec(ctx context.Context, query string, args ...any) (int64, error) {
	db, ok := s.q.(*sql.DB)
	if !ok {
		return s.exec(ctx, query, args...)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		_ = tx.Rollback()
		if mysqlErrno(err) == erBinlogNeedsRow {
			return s.exec(ctx, query, args...)
		}
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
