package sqlitestore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestReplayReadPlan: the replay read (getQuery, which a duplicate claim
// runs on a reader) is one search of the primary key's index, then the
// row by rowid, on an analyzed store — the plan of the bench's raw SELECT
// by key. Any other index, a covering index or a scan would read other
// pages than raw's replay does (docs/performance.md, "Growth").
func TestReplayReadPlan(t *testing.T) {
	t.Parallel()
	path := tempPath(t)
	openAt(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
		INSERT INTO idem_records (scope, key, fingerprint, state, fence, attempt_id, created_at, expires_at)
		SELECT 'tenant-a', printf('k%05d', i), zeroblob(32), 'succeeded', 1, 'a', 1000000 + i, 2000000 FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	plan := queryPlan(t, db, getQuery, "tenant-a", "k00042")
	const want = "SEARCH idem_records USING INDEX sqlite_autoindex_idem_records_1 (scope=? AND key=?)"
	if len(plan) != 1 || plan[0] != want {
		t.Fatalf("replay read plan:\n%s\nwant the one step %q", strings.Join(plan, "\n"), want)
	}
}

// TestReplayTakesNoWriteLock: once duplicates dominate, a claim of an
// existing key is answered from a reader — it neither writes nor waits for
// the write lock. Another connection holds the write lock throughout and
// the store's busy timeout is 1 ms: a replay that touched the writer would
// fail with SQLITE_BUSY.
func TestReplayTakesNoWriteLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, tempPath(t), Config{Migrate: true, BusyTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := claimParams("dup", "first")
	r := mustClaim(t, s, p)
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: r.Record.Fence,
		AttemptID: p.AttemptID, State: idem.StateSucceeded, Result: []byte("ok"),
		CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r.Record}); err != nil {
		t.Fatal(err)
	}
	s.mix.Pin(true) // duplicates dominate

	lock, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tx, err := lock.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	// The lock is real: a write through the store times out.
	if _, err := s.Claim(ctx, claimParams("other", "x")); err == nil {
		t.Fatal("a first-time claim succeeded while another connection held the write lock")
	}
	s.mix.Pin(true)
	before := s.probes.Load()
	for i := range 3 {
		got, err := s.Claim(ctx, claimParams("dup", "again"))
		if err != nil {
			t.Fatalf("replay %d while the write lock is held: %v (the replay path touched the writer)", i, err)
		}
		if got.Claimed || got.Record.State != idem.StateSucceeded || string(got.Record.Result) != "ok" {
			t.Fatalf("replay %d: %+v", i, got)
		}
	}
	if n := s.probes.Load() - before; n != 3 {
		t.Fatalf("%d reader probes for 3 replays", n)
	}
}
