package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// querier is what both *sql.DB and *sql.Tx offer.
type querier = sqlcodec.Querier

// ops are the store operations bound to where their statements run: a
// Store reads on its reader pool and writes on its writer; a transaction
// store does both in the caller's transaction.
type ops struct {
	read, write querier
	// replayCheck lets Claim answer a replay from read before touching
	// write. Off inside a caller's transaction, which must see its own
	// uncommitted rows.
	replayCheck bool
	// mix, with replayCheck, skips the check while first-time claims
	// dominate; probes counts the checks made.
	mix    *claimmix.Mix
	probes *atomic.Int64
	// brokenClaim, set only by tests, replaces the constraint-decided
	// claim after the replay check (the constraint-evidence test).
	brokenClaim claimFunc
	// batch, when set, runs claims and finishes through group commit
	// instead of directly on write.
	batch *batcher
}

// columns is the order scanRecord expects.
const columns = `scope, key, fingerprint, state, fence, attempt_id, intent, result, mark,
	created_at, lease_until, completed_at, expires_at`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(sc scanner) (*idem.Record, error) {
	var (
		r  idem.Record
		fp []byte
		t  scanTemps
	)
	err := sc.Scan(&r.Scope, &r.Key, &fp, &t.state, &r.Fence, &r.AttemptID, &r.Intent, &r.Result,
		&t.mark, &t.created, &t.lease, &t.completed, &t.expires)
	if err != nil {
		return nil, err
	}
	copy(r.Fingerprint[:], fp)
	t.fill(&r)
	return &r, nil
}

// scanTemps are the columns that need converting into a Record.
type scanTemps struct {
	state, mark               string
	created                   int64
	lease, completed, expires sql.NullInt64
}

// fill sets r's converted fields, and keeps an empty intent or result nil.
func (t *scanTemps) fill(r *idem.Record) {
	r.State, r.Mark = idem.State(t.state), idem.Mark(t.mark)
	r.CreatedAt = time.UnixMicro(t.created).UTC()
	r.LeaseUntil, r.CompletedAt, r.ExpiresAt = sqlcodec.FromMicros(t.lease), sqlcodec.FromMicros(t.completed), sqlcodec.FromMicros(t.expires)
	if len(r.Intent) == 0 {
		r.Intent = nil
	}
	if len(r.Result) == 0 {
		r.Result = nil
	}
}

// writeReturning runs a writing statement ending in RETURNING columns and
// scans the one row it returns; sql.ErrNoRows when it changed nothing.
//
// It steps the statement to its end instead of closing it after the first
// row as (*sql.Row).Scan does. An autocommit statement abandoned after its
// row commits in sqlite3_reset, and SQLite runs the WAL hook (hence its
// automatic checkpoint) only when sqlite3_step reports the statement done:
// writes made only through abandoned RETURNING statements are never
// checkpointed, the WAL grows by every commit, and every fsync of a
// growing file costs more than one of a file written in place.
func writeReturning(ctx context.Context, q querier, query string, args ...any) (*idem.Record, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	r, err := scanRecord(rows)
	if err != nil {
		return nil, err
	}
	if rows.Next() { // steps to the end: commits and runs the WAL hook
		return nil, errors.New("sqlitestore: a single-row write returned more than one row")
	}
	if err := rows.Err(); err != nil {
		return nil, err // the commit failed: the write did not happen
	}
	return r, rows.Close()
}
