package dynamostore

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return newStore(t, Config{}) },
		// A second Store with its own client on the same table, as
		// another Lambda container would open it.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			s, err := New(testClient(testenv.SharedDynalite(t)), Config{Table: st.(*Store).Table()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func TestRaceEffects(t *testing.T) {
	s := newStore(t, Config{})
	rep := storetest.Race(t, s, 16, 50)
	if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
		t.Fatalf("race: %+v", rep)
	}
}

// TestMiddleware runs idemhttp's guarantees on this store, each case on
// a table of its own.
func TestMiddleware(t *testing.T) {
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStore(t, Config{}) })
}
