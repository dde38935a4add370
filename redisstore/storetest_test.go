package redisstore

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			storetest.Run(t, storetest.Harness{
				NewStore: func(t *testing.T) idem.Store { return newStoreOn(t, c, Config{}) },
				// A second Store with its own client on the same prefix.
				NewPeer: func(t *testing.T, st idem.Store) idem.Store {
					return newStoreOn(t, b.client(t), Config{Prefix: st.(*Store).prefix})
				},
			})
		})
	}
}

func TestRaceEffects(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := newStoreOn(t, b.client(t), Config{})
			rep := storetest.Race(t, s, 16, 50)
			if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
				t.Fatalf("race: %+v", rep)
			}
		})
	}
}
