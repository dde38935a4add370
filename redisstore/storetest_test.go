package redisstore

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the suite on a standalone client, whose concurrent
// claims and finishes share pipelines (the default), and on a Cluster
// client, whose commands go alone as with Config.Unpipelined.
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

// TestConformanceScriptClaim runs the suite with the claim script alone,
// as on a server without SET NX GET (before Redis 7.0).
func TestConformanceScriptClaim(t *testing.T) {
	c := standaloneClient(t)
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store {
			s := newStoreOn(t, c, Config{})
			s.setNXGet = false
			return s
		},
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			s := newStoreOn(t, standaloneClient(t), Config{Prefix: st.(*Store).prefix})
			s.setNXGet = false
			return s
		},
	})
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

// TestMiddleware runs idemhttp's guarantees on this store, each case
// under a key prefix of its own.
func TestMiddleware(t *testing.T) {
	c := standaloneClient(t)
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStoreOn(t, c, Config{}) })
}
