package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem/pgstore"
)

// TestDuplicateNeverWrites proves that a replay costs no write: 200
// duplicate claims inside one transaction leave it without a transaction id
// (PostgreSQL assigns one at the first write), the row's xmin and ctid
// unchanged, and the per-transaction tuple counters at zero. An ON CONFLICT
// DO UPDATE claim fails all three.
func TestDuplicateNeverWrites(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("k", "a1", t0))
	mustFinish(t, s, succeed(c, "ok", t0, time.Hour))

	pool := sharedPool()
	version := func() (xmin, ctid string) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT xmin::text, ctid::text FROM "+s.QuotedTable()+" WHERE key = 'k'").Scan(&xmin, &ctid); err != nil {
			t.Fatal(err)
		}
		return xmin, ctid
	}
	xmin0, ctid0 := version()

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The xact counters may still hold this backend's unflushed counts from
	// earlier transactions (PostgreSQL 15), so compare with a baseline.
	counters := func() (xid *string, tuples int64) {
		t.Helper()
		err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text, n_tup_ins + n_tup_upd + n_tup_del
			FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, s.QuotedTable()).Scan(&xid, &tuples)
		if err != nil {
			t.Fatal(err)
		}
		return xid, tuples
	}
	_, tuples0 := counters()
	st := s.WithTx(tx)
	// Start in the first-time mode, so the early replays go through the
	// plain insert (ON CONFLICT DO NOTHING) and the later ones, after the
	// chooser has switched, through the read-first path: neither may write.
	pgstore.ForceInsertFirst(s)
	for i := range 200 {
		if got := mustClaim(t, st, claimParams("k", "dup", t0.Add(time.Duration(i)*time.Second))); got.Claimed {
			t.Fatalf("replay %d claimed the key", i)
		}
	}
	if xid, tuples := counters(); xid != nil || tuples != tuples0 {
		t.Fatalf("200 replays wrote: xid assigned %v, tuples written %d", xid != nil, tuples-tuples0)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if xmin, ctid := version(); xmin != xmin0 || ctid != ctid0 {
		t.Fatalf("row version changed by replays: xmin %s→%s, ctid %s→%s", xmin0, xmin, ctid0, ctid)
	}
}
