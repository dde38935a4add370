package pgstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what the operations need from a database handle. It has three
// implementations: the pool (each statement in its own implicit
// transaction), a caller's pgx.Tx and a caller's *sql.Tx.
type querier interface {
	queryRow(ctx context.Context, sql string, args ...any) scanner
	query(ctx context.Context, sql string, args ...any) (rowIter, error)
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	// inTx reports whether statements run inside a caller's transaction, in
	// which case a failed statement aborts it and must not be retried.
	inTx() bool
}

type scanner interface{ Scan(dest ...any) error }

type rowIter interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// pgxQuerier adapts a pgxpool.Pool or a pgx.Tx.
type pgxQuerier struct {
	db interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
	tx bool
}

func (q pgxQuerier) queryRow(ctx context.Context, sql string, args ...any) scanner {
	return q.db.QueryRow(ctx, sql, args...)
}

func (q pgxQuerier) query(ctx context.Context, sql string, args ...any) (rowIter, error) {
	return q.db.Query(ctx, sql, args...)
}

func (q pgxQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) inTx() bool { return q.tx }

// sqlQuerier adapts a database/sql transaction opened through pgx's stdlib
// driver, which passes pgx-typed arguments ([]string for text[]) through.
type sqlQuerier struct{ tx *sql.Tx }

func (q sqlQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	return q.tx.QueryRowContext(ctx, query, args...)
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (rowIter, error) {
	rows, err := q.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) inTx() bool { return true }

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() } //nolint:errcheck // Err reports iteration errors

// isNoRows reports a query that returned no row, from either driver layer.
func isNoRows(err error) bool {
	return errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows)
}

// isRetryable reports errors after which a single statement outside a
// caller's transaction may simply be run again: a serialization failure or
// a deadlock (CockroachDB reports contention as serialization failures).
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return false
}
