package sqlitestore

import (
	"context"
	"runtime"
	"testing"
	"testing/fstest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// brokenSchema is idem_records without its primary key: nothing in the
// database stops two rows for one (scope, key).
const brokenSchema = `CREATE TABLE idem_records (
	scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint BLOB NOT NULL, state TEXT NOT NULL,
	fence INTEGER NOT NULL, attempt_id TEXT NOT NULL, intent BLOB, result BLOB,
	mark TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, lease_until INTEGER,
	completed_at INTEGER, expires_at INTEGER);`

// openBroken opens a store whose schema lacks the primary key and whose
// claim is check-then-insert: the design this package must never have.
// The constraint-evidence test shows the conformance race catches it.
func openBroken(t *testing.T) *Store {
	t.Helper()
	fsys := fstest.MapFS{"migrations/0001_records.sql": {Data: []byte(brokenSchema)}}
	s, err := open(context.Background(), tempPath(t), Config{Migrate: true},
		&Store{migrations: fsys, brokenClaim: checkThenInsert})
	if err != nil {
		t.Fatalf("open broken store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// checkThenInsert runs after the store's own read found no row: it inserts
// without any constraint to stop a concurrent caller who read the same.
func checkThenInsert(ctx context.Context, o ops, p idem.ClaimParams) (idem.ClaimResult, error) {
	runtime.Gosched() // the window between the check and the insert
	_, err := o.write.ExecContext(ctx, `INSERT INTO idem_records
		(scope, key, fingerprint, state, fence, attempt_id, intent, created_at, lease_until)
		VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?, ?)`,
		p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, sqlcodec.Bytes(p.Intent), p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil))
	if err != nil {
		return idem.ClaimResult{}, err
	}
	r, err := o.get(ctx, o.write, p.Scope, p.Key)
	if err != nil {
		return idem.ClaimResult{}, err
	}
	return idem.ClaimResult{Record: *r, Claimed: true}, nil
}
