package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestSweepSparesARowReclaimedMeanwhileOnTheBoundedWalk is
// TestSweepSparesARowReclaimedMeanwhile on the sweep a store runs once it
// has recorded an outcome with a retention longer than the clock slack
// (every production store: the walk bounded by created_at, sweepSince).
// Its DELETE must re-check state and expiry too: the record here was
// recorded with a two-hour retention, so a batched sweep takes that path.
func TestSweepSparesARowReclaimedMeanwhileOnTheBoundedWalk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := testPool(t)
	schema := freshSchema(t, pool)
	st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const ttl = 2 * time.Hour
	c := mustClaim(t, st, claimParams("k", "first", t0))
	if _, err := st.Finish(ctx, succeed(c, "v", t0, ttl)); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	table := st.QuotedTable()
	// The re-claim, held uncommitted: in_progress under fence 2 for every
	// later statement, while the sweep's snapshot still sees it expired.
	if _, err := tx.Exec(ctx, `UPDATE `+table+` SET state = 'p', fence = fence + 1, attempt_id = '\x02'::bytea || 'second'::bytea,
		result = NULL, completed_at = NULL, expires_at = NULL, lease_until = $1 WHERE scope = 'tenant-1' AND key = 'k'`,
		t0.Add(ttl+2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	swept := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = st.Sweep(ctx, idem.SweepParams{Now: t0.Add(ttl + time.Hour), Limit: 10})
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
}
