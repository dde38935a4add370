package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemkit/idem/mysqlstore"
)

// writeCounter counts, through AFTER triggers, the rows that statements on a
// table inserted, updated or deleted. An INSERT rejected by the primary key
// fires no trigger. (Handler_write is no use here: it counts the rejected
// attempt too; the tests read Handler_update and Handler_delete.)
type writeCounter struct {
	db    *sql.DB
	table string
}

func newWriteCounter(t *testing.T, db *sql.DB, table string) *writeCounter {
	t.Helper()
	ctx := context.Background()
	w := &writeCounter{db: db, table: table}
	stmts := []string{
		"CREATE TABLE `" + table + "_writes` (n BIGINT NOT NULL)",
		"INSERT INTO `" + table + "_writes` VALUES (0)",
	}
	for _, ev := range []string{"INSERT", "UPDATE", "DELETE"} {
		stmts = append(stmts, "CREATE TRIGGER `"+table+"_"+ev+"` AFTER "+ev+" ON `"+table+
			"` FOR EACH ROW UPDATE `"+table+"_writes` SET n = n + 1")
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS `" + table + "_writes`") })
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return w
}

func (w *writeCounter) rows(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := w.db.QueryRow("SELECT n FROM `" + w.table + "_writes`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sessionStatus(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var k string
	var v int64
	if err := db.QueryRow("SHOW SESSION STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDuplicateClaimWritesNothing proves that a replay costs no write: a
// duplicate claim neither inserts, updates nor deletes a row. The write
// counter is first shown to notice the ON DUPLICATE KEY UPDATE anti-pattern,
// so a zero below is a real zero.
func TestDuplicateClaimWritesNothing(t *testing.T) {
	db, dsn := rawDB(t)
	table := testTable(t, db)
	ctx := context.Background()
	// One connection, so that SESSION STATUS is the store's session.
	one, err := sql.Open("mysql", withParam(dsn, "interpolateParams=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	st, err := mysqlstore.New(context.Background(), one, mysqlstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w := newWriteCounter(t, db, table)
	mustClaim(t, st, claimParams("k", "a1", t0))
	if got := w.rows(t); got != 1 {
		t.Fatalf("first claim wrote %d rows, want 1 (is the counter working?)", got)
	}
	// The counter sees upserts, even one that leaves the values as they
	// were: AFTER triggers fire for every row a statement processes.
	if _, err := db.Exec("INSERT INTO `" + table + "` (scope, `key`, fingerprint, state, fence, attempt_id, created_at) " +
		"VALUES ('tenant-1', 'k', REPEAT('x', 32), 'in_progress', 1, 'z', 0) ON DUPLICATE KEY UPDATE fence = fence + 0, attempt_id = attempt_id"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO `" + table + "` (scope, `key`, fingerprint, state, fence, attempt_id, created_at) " +
		"VALUES ('tenant-1', 'k', REPEAT('x', 32), 'in_progress', 1, 'z', 0) ON DUPLICATE KEY UPDATE fence = fence + 1"); err != nil {
		t.Fatal(err)
	}
	base := w.rows(t)
	if base < 2 {
		t.Fatalf("counter did not notice an upsert: %d", base)
	}

	upd, del := sessionStatus(t, one, "Handler_update"), sessionStatus(t, one, "Handler_delete")
	const dups = 20
	for range dups {
		if res := mustClaim(t, st, claimParams("k", "a2", t0)); res.Claimed {
			t.Fatal("duplicate was Claimed")
		}
	}
	if got := w.rows(t) - base; got != 0 {
		t.Errorf("%d duplicate claims wrote %d rows, want 0", dups, got)
	}
	if d := sessionStatus(t, one, "Handler_update") - upd; d != 0 {
		t.Errorf("Handler_update grew by %d over %d duplicate claims, want 0", d, dups)
	}
	if d := sessionStatus(t, one, "Handler_delete") - del; d != 0 {
		t.Errorf("Handler_delete grew by %d over %d duplicate claims, want 0", d, dups)
	}
}
