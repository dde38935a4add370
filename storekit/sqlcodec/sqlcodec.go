// Package sqlcodec is how the database/sql stores (sqlitestore and
// mysqlstore) put Go values into columns and read them back, one rule for
// both (pgstore shares the time rule and [Finished]):
//
//   - a time is a BIGINT of microseconds since the Unix epoch, read back in
//     UTC, and the zero time is NULL: no dependence on a driver's time
//     parsing, the session time zone or a DATETIME range, and comparisons in
//     SQL are integer comparisons (the engine truncates times to the
//     microsecond, so nothing is lost);
//   - a byte slice is NULL when it is nil and itself otherwise, empty
//     included.
package sqlcodec

import (
	"context"
	"database/sql"
	"time"

	"github.com/idemkit/idem"
)

// Querier is what *sql.DB, *sql.Tx and *sql.Conn have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Micros is t for a nullable time column: unix microseconds, or NULL for
// the zero time.
func Micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// FromMicros reads a nullable time column: NULL is the zero time.
func FromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// Bytes is b for a nullable BLOB column: NULL when b is nil, b otherwise.
func Bytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// Stored is t as a read returns it: whole microseconds in UTC, the zero
// time kept.
func Stored(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// Finished is the record a read returns after a Finish that wrote p's
// outcome over the claim c, without reading it back.
func Finished(c *idem.Record, p idem.FinishParams) *idem.Record {
	r := *c
	r.State, r.Result = p.State, p.Result
	r.CreatedAt, r.LeaseUntil = Stored(c.CreatedAt), Stored(c.LeaseUntil)
	r.CompletedAt, r.ExpiresAt = Stored(p.CompletedAt), Stored(p.ExpiresAt)
	return &r
}
