package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// effectsTable creates a table standing for the caller's own data.
func effectsTable(t *testing.T, f *fixture) string {
	t.Helper()
	name := f.table + "_fx"
	if _, err := f.db.Exec("CREATE TABLE `" + name + "` (id VARBINARY(255) PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Exec("DROP TABLE IF EXISTS `" + name + "`") })
	return name
}

// runInTx claims, writes the local effect and records the outcome in one
// transaction, then commits or rolls back.
func runInTx(t *testing.T, f *fixture, fx, key string, commit bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := f.st.WithTx(tx)
	res := mustClaim(t, st, claimParams(key, "a1", t0))
	if !res.Claimed {
		t.Fatalf("claim in tx not Claimed: %+v", res)
	}
	if _, err := tx.Exec("INSERT INTO `"+fx+"` VALUES (?)", key); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, succeed(key, "a1", 1, "ok", t0)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestWithTxRollbackLeavesNothing(t *testing.T) {
	f := newFixture(t)
	fx := effectsTable(t, f)
	runInTx(t, f, fx, "k", false)
	if _, err := f.st.Get(context.Background(), "tenant-1", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("record after rollback: %v", err)
	}
	if n := countRows(t, f.db, fx); n != 0 {
		t.Fatalf("%d effects after rollback", n)
	}
}

func TestWithTxCommitLeavesBoth(t *testing.T) {
	f := newFixture(t)
	fx := effectsTable(t, f)
	runInTx(t, f, fx, "k", true)
	rec, err := f.st.Get(context.Background(), "tenant-1", "k")
	if err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("record after commit = %+v, %v", rec, err)
	}
	if n := countRows(t, f.db, fx); n != 1 {
		t.Fatalf("%d effects after commit, want 1", n)
	}
	// The view's Close did not close the store.
	if _, err := f.st.Get(context.Background(), "tenant-1", "k"); err != nil {
		t.Fatalf("store unusable after closing a tx view: %v", err)
	}
}

// TestWithTxSeesWinnerDespiteOldSnapshot: under REPEATABLE READ a
// transaction whose snapshot predates a concurrent claim cannot see that
// claim with a plain read, yet its INSERT hits the primary key. The claim
// must still return the winner's record (a locking read sees it).
func TestWithTxSeesWinnerDespiteOldSnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	// Take the snapshot now.
	if err := tx.QueryRow("SELECT COUNT(*) FROM `" + f.table + "`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	winner := mustClaim(t, f.st, claimParams("k", "winner", t0)) // commits outside tx
	res, err := f.st.WithTx(tx).Claim(ctx, claimParams("k", "loser", t0))
	if err != nil {
		t.Fatalf("claim in old snapshot: %v", err)
	}
	if res.Claimed || res.Record.AttemptID != winner.Record.AttemptID {
		t.Fatalf("claim in old snapshot = %+v, want the winner's record", res)
	}
}

// TestWithTxUncommittedClaimBlocksThenYields: a claim inside an open
// transaction holds the key; a concurrent claimer waits on the primary key
// and becomes the owner when that transaction rolls back.
func TestWithTxUncommittedClaimBlocksThenYields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A failure below must not leave the row locked: the table's DROP in
	// the fixture's cleanup would wait for it.
	t.Cleanup(func() { _ = tx.Rollback() })
	if res := mustClaim(t, f.st.WithTx(tx), claimParams("k", "tx", t0)); !res.Claimed {
		t.Fatal("claim in tx not Claimed")
	}
	type answer struct {
		res idem.ClaimResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := f.st.Claim(ctx, claimParams("k", "other", t0))
		done <- answer{res, err}
	}()
	waitForLockWait(t, f.db, done)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.err != nil || !a.res.Claimed || a.res.Record.AttemptID != "other" {
		t.Fatalf("waiter after rollback = %+v, %v; want it to own the key", a.res, a.err)
	}
}

// waitForLockWait blocks until some transaction waits for a row lock, a
// signal rather than a sleep. It fails at once if the waiter answers
// first (it was never blocked, or it gave up), with what the server was
// doing.
func waitForLockWait[T any](t *testing.T, db *sql.DB, waiter <-chan T) {
	t.Helper()
	// Bounded by time, not by a number of polls: under a loaded CI run each
	// information_schema query can take milliseconds. And polled no more
	// often than every 100 ms: InnoDB answers innodb_trx from a cache it
	// refreshes only when the last read is older than that, so faster
	// polls keep reading the snapshot taken before the waiter blocked.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case a := <-waiter:
			t.Fatalf("the waiting claim answered before any transaction waited for a lock: %+v\n%s", a, processList(db))
		case <-time.After(150 * time.Millisecond):
		}
	}
	t.Fatalf("no transaction ever waited for the lock\n%s", processList(db))
}

// processList is the server's SHOW FULL PROCESSLIST, for a failure's
// message.
func processList(db *sql.DB) string {
	rows, err := db.Query("SELECT ID, COMMAND, TIME, COALESCE(STATE, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST")
	if err != nil {
		return "processlist: " + err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, secs int64
		var cmd, state, info string
		if err := rows.Scan(&id, &cmd, &secs, &state, &info); err != nil {
			return b.String() + "processlist: " + err.Error()
		}
		fmt.Fprintf(&b, "  %d %s %ds %q %q\n", id, cmd, secs, state, info)
	}
	return b.String()
}
