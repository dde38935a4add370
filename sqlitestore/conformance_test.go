package sqlitestore

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the shared suite with a fresh database file per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return newStore(t) },
		// A second Store on the same file, as another process opens it.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store { return openAt(t, st.(*Store).cfg.path) },
	})
}

// TestConstraintEvidence proves the primary key is what keeps effects
// exactly-once: without it, and with a check-then-insert claim, the suite's
// race runs duplicate effects; the real store runs none.
func TestConstraintEvidence(t *testing.T) {
	var extra int
	for round := 0; round < 3 && extra == 0; round++ {
		extra = storetest.RaceEffects(t, openBroken(t), 16, 30)
	}
	if extra == 0 {
		t.Fatal("no duplicate effects against a store without the primary key: the race cannot fail")
	}
	t.Logf("store without primary key: %d duplicate effects", extra)
	if real := storetest.RaceEffects(t, newStore(t), 16, 30); real != 0 {
		t.Fatalf("the real store ran %d duplicate effects", real)
	}
}

// TestMiddleware runs idemhttp's guarantees on this store.
func TestMiddleware(t *testing.T) {
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStore(t) })
}
