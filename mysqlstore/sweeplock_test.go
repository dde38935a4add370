package mysqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestSweepDoesNotHoldNewClaims: while a sweep batch is in progress (here
// held up by a row lock on one of the expired records), a new claim's
// insert goes through at once. Under REPEATABLE READ the batch's range
// scan of the expires_at index took next-key locks, whose first gap is
// where every in-progress record's entry (expires_at NULL) goes, and each
// batch held every first-time claim until it committed; the sweep now runs
// under READ COMMITTED. The insert runs with a one-second lock wait, so the
// old behaviour fails with a lock wait timeout instead of hanging.
func TestSweepDoesNotHoldNewClaims(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, k := range []string{"old-1", "old-2"} {
		c, err := f.st.Claim(ctx, idem.ClaimParams{Scope: "s", Key: k, Fingerprint: fp(k), AttemptID: "a", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		if err == nil {
			_, err = f.st.Finish(ctx, idem.FinishParams{Scope: "s", Key: k, Fence: c.Record.Fence, AttemptID: "a",
				State: idem.StateSucceeded, Result: []byte("v"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Hold the second expired record's row lock: the sweep deletes the
	// first and then waits here, mid-batch.
	holder, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	var n int
	if err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+f.table+"` WHERE scope = 's' AND `key` = 'old-2' FOR UPDATE").Scan(&n); err != nil || n != 1 {
		t.Fatalf("lock old-2: %d, %v", n, err)
	}
	swept := make(chan error, 1)
	go func() {
		n, err := f.st.Sweep(ctx, idem.SweepParams{Now: t0.Add(2 * time.Hour), Limit: 10})
		if err == nil && n != 2 {
			t.Errorf("sweep deleted %d, want 2", n)
		}
		swept <- err
	}()
	// Wait until the sweep is blocked on old-2.
	waitForBlockedDelete(ctx, t, f.db, f.table, swept)
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO `"+f.table+"` (scope, `key`, fingerprint, state, fence, attempt_id, created_at, lease_until) "+
		"VALUES ('s', 'new', ?, 'in_progress', 1, 'b', ?, ?)", make([]byte, 32), t0.Add(2*time.Hour).UnixMicro(), t0.Add(3*time.Hour).UnixMicro()); err != nil {
		t.Fatalf("a new claim's insert during a sweep batch: %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
}

// TestSweepRunsAgainAfterADeadlock: a sweep batch chosen as a deadlock's
// victim lost the whole batch, which deleted nothing, so the store runs it
// again instead of failing the sweep. Here a transaction that has written
// more (so InnoDB rolls back the sweep, the lighter one) holds one expired
// record while the sweep holds the other, then asks for the sweep's.
func TestSweepRunsAgainAfterADeadlock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, k := range []string{"old-1", "old-2", "w-1", "w-2", "w-3", "w-4", "w-5"} {
		c, err := f.st.Claim(ctx, idem.ClaimParams{Scope: "s", Key: k, Fingerprint: fp(k), AttemptID: "a", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		if err == nil && strings.HasPrefix(k, "old-") {
			_, err = f.st.Finish(ctx, idem.FinishParams{Scope: "s", Key: k, Fence: c.Record.Fence, AttemptID: "a",
				State: idem.StateSucceeded, Result: []byte("v"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	holder, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	// Weight: five rows written, so the sweep (one row deleted) is the victim.
	if _, err := holder.ExecContext(ctx, "UPDATE `"+f.table+"` SET lease_until = lease_until + 1 WHERE scope = 's' AND `key` LIKE 'w-%'"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+f.table+"` WHERE scope = 's' AND `key` = 'old-2' FOR UPDATE").Scan(&n); err != nil || n != 1 {
		t.Fatalf("lock old-2: %d, %v", n, err)
	}
	swept := make(chan error, 1)
	var deleted int
	go func() {
		var err error
		deleted, err = f.st.Sweep(ctx, idem.SweepParams{Now: t0.Add(2 * time.Hour), Limit: 10})
		swept <- err
	}()
	waitForBlockedDelete(ctx, t, f.db, f.table, swept)
	// The sweep holds old-1 (deleted, uncommitted) and waits for old-2:
	// asking for old-1 closes the cycle.
	if err := holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+f.table+"` WHERE scope = 's' AND `key` = 'old-1' FOR UPDATE").Scan(&n); err != nil {
		t.Fatalf("the heavier transaction lost the deadlock (the test's premise): %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-swept; err != nil {
		t.Fatalf("sweep after a deadlock: %v", err)
	}
	if deleted != 2 {
		t.Fatalf("sweep deleted %d, want 2", deleted)
	}
}

// waitForBlockedDelete returns once a DELETE on table has run for 300 ms
// or more — waiting on a row lock, since its rows take far less — and
// fails the test if the sweep (whose result swept carries) ends first or
// a minute passes. It reads PROCESSLIST: INNODB_TRX's snapshot of lock
// waits proved unreliable, missing a wait of 50 s in one run of two.
func waitForBlockedDelete(ctx context.Context, t *testing.T, db *sql.DB, table string, swept <-chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND IN ('Query', 'Execute') AND TIME_MS >= 300 AND INFO LIKE 'DELETE FROM `"+table+"`%'").Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		select {
		case err := <-swept:
			t.Fatalf("the sweep ended (%v) while a record it must delete was locked", err)
		default:
		}
		if time.Now().After(deadline) {
			rows, _ := db.QueryContext(ctx, "SELECT trx_state, COALESCE(trx_query, '') FROM information_schema.INNODB_TRX")
			for rows != nil && rows.Next() {
				var a, b string
				_ = rows.Scan(&a, &b)
				t.Logf("trx %s %q", a, b)
			}
			t.Fatal("the sweep never waited on the held row")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
