package pgstore

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// recordRow receives the columns of a record from either driver layer.
type recordRow struct {
	rec                                idem.Record
	fingerprint, attempt               []byte
	state                              stateByte
	mark                               string
	leaseUntil, completedAt, expiresAt sql.NullTime
	createdAt                          time.Time
}

// dest returns the scan destinations in the order of [columns].
func (r *recordRow) dest() []any {
	return []any{&r.rec.Scope, &r.rec.Key, &r.fingerprint, &r.state, &r.rec.Fence, &r.attempt,
		&r.rec.Intent, &r.rec.Result, &r.mark, &r.createdAt, &r.leaseUntil, &r.completedAt, &r.expiresAt}
}

// record converts the scanned row, with every time in UTC.
func (r *recordRow) record() (idem.Record, error) {
	rec := r.rec
	if len(r.fingerprint) != len(rec.Fingerprint) {
		return rec, fmt.Errorf("pgstore: record %q/%q has a %d-byte fingerprint", rec.Scope, rec.Key, len(r.fingerprint))
	}
	copy(rec.Fingerprint[:], r.fingerprint)
	st, ok := statecode.State(byte(r.state))
	if !ok {
		return rec, fmt.Errorf("pgstore: record %q/%q has state code %q", rec.Scope, rec.Key, r.state)
	}
	rec.State = st
	id, ok := decodeAttempt(r.attempt)
	if !ok {
		return rec, fmt.Errorf("pgstore: record %q/%q has a malformed attempt id %x", rec.Scope, rec.Key, r.attempt)
	}
	rec.AttemptID = id
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

// stateByte receives a state code from either driver layer: pgx scans a
// "char" into it as a byte, database/sql hands it over as a one-byte string.
type stateByte byte

// Scan implements [sql.Scanner].
func (b *stateByte) Scan(src any) error {
	switch v := src.(type) {
	case string:
		if len(v) == 1 {
			*b = stateByte(v[0])
			return nil
		}
	case []byte:
		if len(v) == 1 {
			*b = stateByte(v[0])
			return nil
		}
	case int64:
		if 0 <= v && v < 256 {
			*b = stateByte(v)
			return nil
		}
	}
	return fmt.Errorf("pgstore: a state code is one byte, not %T %v", src, src)
}

// Attempt ids are stored as bytea behind a tag byte (migration 0003): the
// engine's ids, 32 lower-case hex digits, as their 16 bytes; any other id
// as its bytes.
const (
	attemptHex  = 1
	attemptText = 2
)

// encodeAttempt is id as stored.
func encodeAttempt(id string) []byte {
	if len(id) == 2*16 {
		b := make([]byte, 1+16)
		b[0] = attemptHex
		ok := true
		for i := range 16 {
			hi, lo := lowerHex(id[2*i]), lowerHex(id[2*i+1])
			ok = ok && hi >= 0 && lo >= 0
			b[1+i] = byte(hi<<4 | lo&0xf)
		}
		if ok {
			return b
		}
	}
	return append([]byte{attemptText}, id...)
}

// lowerHex is the value of the lower-case hex digit c, or -1: an upper-case
// digit would not survive the round trip through hex.EncodeToString.
func lowerHex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// decodeAttempt reverses encodeAttempt.
func decodeAttempt(b []byte) (string, bool) {
	switch {
	case len(b) == 1+16 && b[0] == attemptHex:
		return hex.EncodeToString(b[1:]), true
	case len(b) >= 1 && b[0] == attemptText:
		return string(b[1:]), true
	}
	return "", false
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
