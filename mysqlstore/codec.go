package mysqlstore

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Times are stored as BIGINT microseconds since the Unix epoch (UTC): no
// dependence on parseTime, the session time zone or DATETIME's range, and
// comparisons in SQL are integer comparisons. The engine passes times
// truncated to the microsecond, so nothing is lost.

// micros encodes t for a nullable column: the zero time is NULL.
func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros decodes a nullable time column.
func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// nullBytes stores a nil slice as NULL, so that nil and empty survive a
// round trip distinctly.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

type scanner interface{ Scan(dest ...any) error }

// scanRecord reads one row in the order of columns.
func scanRecord(row scanner) (*idem.Record, error) {
	var (
		r                         idem.Record
		fp, intent, result        []byte
		state, mark               string
		created                   int64
		lease, completed, expires sql.NullInt64
	)
	err := row.Scan(&r.Scope, &r.Key, &fp, &state, &r.Fence, &r.AttemptID, &intent, &result, &mark,
		&created, &lease, &completed, &expires)
	if err != nil {
		return nil, err
	}
	if len(fp) != len(r.Fingerprint) {
		return nil, fmt.Errorf("mysqlstore: record %q has a %d-byte fingerprint", r.Key, len(fp))
	}
	copy(r.Fingerprint[:], fp)
	if r.State, err = idem.ParseState(state); err != nil {
		return nil, err
	}
	r.Intent, r.Result, r.Mark = intent, result, idem.Mark(mark)
	r.CreatedAt = time.UnixMicro(created).UTC()
	r.LeaseUntil, r.CompletedAt, r.ExpiresAt = fromMicros(lease), fromMicros(completed), fromMicros(expires)
	return &r, nil
}

// norm returns t as a read would: microsecond precision, UTC, zero kept.
func norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}
