package natsstore

import (
	"github.com/nats-io/nats.go"

	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the store suite on a one-replica bucket of the
// shared server (IDEM_TEST_NATS), each test on a bucket of its own.
func TestConformance(t *testing.T) {
	url := sharedURL(t)
	nc := connect(t, url)
	runConformance(t, nc, url, 1)
}

func runConformance(t *testing.T, nc *nats.Conn, url string, replicas int) {
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return newStore(t, nc, newBucket(t, nc, replicas)) },
		// A second Store with its own connection on the same bucket.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			return newStore(t, connect(t, url), st.(*Store).bucket)
		},
	})
}

func TestRaceEffects(t *testing.T) {
	nc := connect(t, sharedURL(t))
	s := newStore(t, nc, newBucket(t, nc, 1))
	rep := storetest.Race(t, s, 16, 50)
	if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
		t.Fatalf("race: %+v", rep)
	}
}

// TestMiddleware runs idemhttp's guarantees on this store, each case on
// a bucket of its own of the shared server.
func TestMiddleware(t *testing.T) {
	nc := connect(t, sharedURL(t))
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStore(t, nc, newBucket(t, nc, 1)) })
}
