package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestSweepSparesARowReclaimedMeanwhile: a sweep decides which rows are
// expired from one snapshot and deletes them a moment later. A row
// re-claimed in that moment (an expired record taken over by a new
// attempt) must survive: the DELETE re-checks state and expiry on the row
// it locks. The re-claim is held open in a transaction until the sweep is
// seen waiting for its row lock, then committed, so the race is not left
// to chance. Without the re-check the sweep deletes an in_progress record
// whose effect is running, and a retry would run the effect again.
func TestSweepSparesARowReclaimedMeanwhile(t *testing.T) {
	for name, limit := range map[string]int{"bounded": 10, "unbounded": 0} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f := newRaceFixture(ctx, t, "v")
			st, pool, schema, tx, table := f.st, f.pool, f.schema, f.tx, f.st.QuotedTable()

			// The re-claim, held uncommitted: the row is in_progress under
			// fence 2 for every later statement, but the sweep's snapshot
			// still sees it expired and succeeded.
			if _, err := tx.Exec(ctx, `UPDATE `+table+` SET state = 'p', fence = fence + 1, attempt_id = '\x02'::bytea || 'second'::bytea,
				result = NULL, completed_at = NULL, expires_at = NULL, lease_until = $1 WHERE scope = 'tenant-1' AND key = 'k'`,
				t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}

			swept := make(chan error, 1)
			var n int
			go func() {
				var err error
				n, err = st.Sweep(ctx, idem.SweepParams{Now: t0.Add(10 * time.Minute), Limit: limit})
				swept <- err
			}()
			waitForLockWait(ctx, t, pool, schema)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-swept; err != nil {
				t.Fatal(err)
			}
			got, err := st.Get(ctx, "tenant-1", "k")
			if err != nil {
				t.Fatalf("the re-claimed record is gone after the sweep (deleted %d): %v", n, err)
			}
			if got.State != idem.StateInProgress || got.Fence != 2 || got.AttemptID != "second" || n != 0 {
				t.Fatalf("after the sweep (deleted %d): %+v, want the re-claim in_progress at fence 2", n, got)
			}
		})
	}
}

// raceFixture is a store in a scratch schema holding one record, ("tenant-1",
// "k"), succeeded at t0 with result and expiring at t0+1m, and an open
// transaction on the same pool, rolled back when the test ends unless
// committed.
type raceFixture struct {
	st     *pgstore.Store
	pool   *pgxpool.Pool
	schema string
	tx     pgx.Tx
}

func newRaceFixture(ctx context.Context, t *testing.T, result string) raceFixture {
	t.Helper()
	pool := testPool(t)
	schema := freshSchema(t, pool)
	st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := mustClaim(t, st, claimParams("k", "first", t0))
	if _, err := st.Finish(ctx, succeed(c, result, t0, time.Minute)); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return raceFixture{st: st, pool: pool, schema: schema, tx: tx}
}

// waitForLockWait returns once a DELETE on schema's table waits for a row
// lock.
func waitForLockWait(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	waitForLockWaitOn(ctx, t, pool, schema, "DELETE FROM ")
}

// waitForLockWaitOn returns once a statement starting with prefix on
// schema's table waits for a row lock.
func waitForLockWaitOn(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema, prefix string) {
	t.Helper()
	for {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND starts_with(ltrim(query), $2) AND position($1 in query) > 0`, schema, prefix).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %q statement waited for the row's lock", prefix)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestReclaimRechecksExpiry: a claim that read an expired record takes it
// over with a second statement, and the row can change in between (swept
// and claimed afresh, finished, and not expired). The take-over re-checks
// expiry on the row it locks, so it replays the new outcome instead of
// running a second effect over it. The change is held in a transaction
// that locks the row before the claim reads it (a plain read, not
// blocked), and is committed once the take-over waits for the lock.
func TestReclaimRechecksExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newRaceFixture(ctx, t, "old")
	st, pool, schema, tx, table := f.st, f.pool, f.schema, f.tx, f.st.QuotedTable()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE scope = 'tenant-1' AND key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	later := t0.Add(10 * time.Minute) // the old record expired at t0+1m
	type answer struct {
		res idem.ClaimResult
		err error
	}
	claimed := make(chan answer, 1)
	go func() {
		res, err := st.Claim(ctx, claimParams("k", "second", later))
		claimed <- answer{res, err}
	}()
	waitForLockWaitOn(ctx, t, pool, schema, "UPDATE ")
	// The row as a sweep, a fresh claim (fence 1 again) and its finish
	// leave it: succeeded, expiring long after the waiting claim's now.
	if _, err := tx.Exec(ctx, `UPDATE `+table+` SET attempt_id = '\x02'::bytea || 'fresh'::bytea, result = 'new', completed_at = $1, expires_at = $2
		WHERE scope = 'tenant-1' AND key = 'k'`, later, later.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-claimed
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.Claimed || a.res.Record.AttemptID != "fresh" || string(a.res.Record.Result) != "new" {
		t.Fatalf("claim after the row changed = %+v, want the replay of the fresh outcome", a.res)
	}
}
