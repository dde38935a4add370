package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// t0 is the tests' clock: stores never read their own.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func tempPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "idem.db")
}

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Config{Migrate: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newStore(t testing.TB) *Store { return openAt(t, tempPath(t)) }

func claimParams(key, attempt string) idem.ClaimParams {
	return idem.ClaimParams{
		Scope: "tenant-a", Key: key, AttemptID: attempt,
		Fingerprint: idem.NewFingerprint([]byte("POST /charge"), []byte(key)),
		Intent:      []byte(`{"amount":50}`),
		Now:         t0, LeaseUntil: t0.Add(30 * time.Second),
	}
}

func mustClaim(t *testing.T, st idem.Store, p idem.ClaimParams) idem.ClaimResult {
	t.Helper()
	r, err := st.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", p.Key, p.AttemptID, err)
	}
	return r
}

func finishParams(r idem.Record, state idem.State, result string) idem.FinishParams {
	p := idem.FinishParams{
		Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: state, Result: []byte(result), CompletedAt: t0.Add(time.Second),
	}
	if state.Terminal() {
		p.ExpiresAt = t0.Add(time.Hour)
	}
	return p
}

func mustFinish(t *testing.T, st idem.Store, p idem.FinishParams) *idem.Record {
	t.Helper()
	r, err := st.Finish(context.Background(), p)
	if err != nil {
		t.Fatalf("Finish(%s, fence %d, %s): %v", p.Key, p.Fence, p.State, err)
	}
	return r
}

func mustGet(t *testing.T, st idem.Store, key string) *idem.Record {
	t.Helper()
	r, err := st.Get(context.Background(), "tenant-a", key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

// observer opens an independent connection to the file; its
// PRAGMA data_version moves whenever any other connection commits a change.
func observer(t *testing.T, path string) func() int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return func() int64 {
		var v int64
		if err := db.QueryRow(`PRAGMA data_version`).Scan(&v); err != nil {
			t.Fatalf("data_version: %v", err)
		}
		return v
	}
}

// totalChanges counts rows changed through the writer connection.
func totalChanges(t *testing.T, s *Store) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRow(`SELECT total_changes()`).Scan(&n); err != nil {
		t.Fatalf("total_changes: %v", err)
	}
	return n
}
