package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the suite on the zero Config: the eager group
// commit of claims and outcomes.
func TestConformance(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{}, false)
}

// TestConformanceUnbatched runs the suite with group commit off: every
// write its own statement and transaction.
func TestConformanceUnbatched(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Unbatched: true}, false)
}

// TestConformanceInsertFirstAsyncOutcomes runs the suite unbatched with
// the claim-path chooser pinned to its first-time mode (a plain INSERT
// whose record is built, not read back), which the default mode only
// reaches after a run of new keys, and with Config.AsyncOutcomes:
// relaxing the outcome's flush must not change any answer either. (One
// suite for both keeps the package's run short; unbatched durable
// outcomes run in TestConformanceUnbatched.)
func TestConformanceInsertFirstAsyncOutcomes(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Unbatched: true, AsyncOutcomes: true}, true)
}

// TestConformanceBatched runs the suite with group commit on: batching
// must not change any answer.
func TestConformanceBatched(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond, MaxSize: 32}}, false)
}

// TestConformanceBatchedEager runs the suite with group commit without a
// window (Batch.Eager).
func TestConformanceBatchedEager(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Batch: pgstore.Batch{Eager: true, MaxSize: 32}}, false)
}

// TestConformanceBatchedInsertFirst runs the suite with group commit on
// and the claim-path chooser pinned to its first-time mode: batched claims
// are then plain inserts returning the row, and a taken key goes on to the
// claim statement in a later batch.
func TestConformanceBatchedInsertFirst(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond, MaxSize: 32}}, true)
}

// TestConformanceBatchedFinishes runs the suite with outcomes batched too.
func TestConformanceBatchedFinishes(t *testing.T) {
	t.Parallel()
	runConformance(t, pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond, MaxSize: 32}, BatchFinishes: true}, false)
}

func runConformance(t *testing.T, cfg pgstore.Config, insertFirst bool) {
	var schemas sync.Map // *pgstore.Store → schema
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store {
			st := newStore(t, cfg)
			if insertFirst {
				pgstore.ForceInsertFirst(st)
			}
			schemas.Store(st, st.Schema())
			return st
		},
		// A second store with its own pool (and its own LISTEN connection) on
		// the same schema, as another process opens it.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			schema, _ := schemas.Load(st)
			pool, err := pgxpool.New(context.Background(), testenv.Postgres.Need(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			peer, err := pgstore.New(context.Background(), pool, pgstore.Config{Schema: schema.(string), Batch: cfg.Batch, BatchFinishes: cfg.BatchFinishes, Unbatched: cfg.Unbatched})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { peer.Close() })
			if insertFirst {
				pgstore.ForceInsertFirst(peer)
			}
			return peer
		},
	})
}

// TestConformanceInTx runs the suite through the transaction twin with each
// operation in its own committed transaction, which shows the twin has the
// same semantics as the store.
func TestConformanceInTx(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return autoTx{newStore(t, pgstore.Config{})} },
	})
}

// TestConstraintEvidence shows that the primary key is what keeps effects
// single: the same table without it, claimed by check-then-insert, lets the
// conformance race run duplicate effects; the real store runs none.
func TestConstraintEvidence(t *testing.T) {
	t.Parallel()
	broken, err := pgstore.CheckThenInsert(context.Background(), newStore(t, pgstore.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	var extra int
	for round := 0; round < 3 && extra == 0; round++ {
		extra = storetest.RaceEffects(t, broken, 32, 50)
	}
	if extra == 0 {
		t.Fatal("no duplicate effects without the primary key: the race cannot detect a broken claim")
	}
	t.Logf("without the primary key: %d duplicate effects", extra)
	if real := storetest.RaceEffects(t, newStore(t, pgstore.Config{}), 32, 50); real != 0 {
		t.Fatalf("the real store ran %d duplicate effects", real)
	}
}

// TestMiddleware runs idemhttp's guarantees on this store, each case in a
// fresh schema.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStore(t, pgstore.Config{}) })
}
