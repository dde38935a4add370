package mysqlstore

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

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
	r.LeaseUntil, r.CompletedAt, r.ExpiresAt = sqlcodec.FromMicros(lease), sqlcodec.FromMicros(completed), sqlcodec.FromMicros(expires)
	return &r, nil
}
