package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	var schemas sync.Map // *pgstore.Store → schema
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store {
			var cfg pgstore.Config
			st := newStore(t, cfg)
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
			peer, err := pgstore.New(context.Background(), pool, pgstore.Config{Schema: schema.(string)})
			if err != nil {
				t.Fatal(err)
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
