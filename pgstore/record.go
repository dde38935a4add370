package pgstore

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemkit/idem"
)

// recordRow receives the columns of a record from either driver layer.
type recordRow struct {
	rec                                idem.Record
	fingerprint                        []byte
	state, mark                        string
	leaseUntil, completedAt, expiresAt sql.NullTime
	createdAt                          time.Time
}

// dest returns the scan destinations in the order of [columns].
func (r *recordRow) dest() []any {
	return []any{&r.rec.Scope, &r.rec.Key, &r.fingerprint, &r.state, &r.rec.Fence, &r.rec.AttemptID,
		&r.rec.Intent, &r.rec.Result, &r.mark, &r.createdAt, &r.leaseUntil, &r.completedAt, &r.expiresAt}
}

// record converts the scanned row, with every time in UTC.
func (r *recordRow) record() (idem.Record, error) {
	rec := r.rec
	if len(r.fingerprint) != len(rec.Fingerprint) {
		return rec, fmt.Errorf("pgstore: record %q/%q has a %d-byte fingerprint", rec.Scope, rec.Key, len(r.fingerprint))
	}
	copy(rec.Fingerprint[:], r.fingerprint)
	st, err := idem.ParseState(r.state)
	if err != nil {
		return rec, err
	}
	rec.State = st
	rec.Mark = idem.Mark(r.mark)
	rec.CreatedAt = r.createdAt.UTC()
	rec.LeaseUntil = fromNull(r.leaseUntil)
	rec.CompletedAt = fromNull(r.completedAt)
	rec.ExpiresAt = fromNull(r.expiresAt)
	return rec, nil
}

// scanRecord scans one record followed by extra columns.
func scanRecord(row scanner, extra ...any) (idem.Record, error) {
	var r recordRow
	if err := row.Scan(append(r.dest(), extra...)...); err != nil {
		return idem.Record{}, err
	}
	return r.record()
}

func fromNull(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// nullTime is t as a timestamptz parameter, the zero time as NULL. pgx
// encodes a pgtype.Timestamptz as it is, where a time.Time is first
// wrapped in another interface value: one allocation less per parameter.
func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t.UTC(), Valid: !t.IsZero()}
}

// channelName is the LISTEN channel of one table. It is derived from the
// schema and table, so stores on other tables are not woken, and it is short
// enough to be a valid identifier whatever their length.
func channelName(schema, table string) string {
	h := sha256.Sum256([]byte(schema + "\x00" + table))
	return "idem_" + hex.EncodeToString(h[:8])
}

// keyToken is the NOTIFY payload for (scope, key): a hash, so payloads have
// a fixed size and keys are not broadcast to every listener of the database.
func keyToken(scope, key string) string {
	var buf [128]byte // keys that fit are hashed without an allocation
	h := sha256.Sum256(append(append(append(buf[:0], scope...), 0), key...))
	return hex.EncodeToString(h[:16])
}
