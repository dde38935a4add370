package idemhttp_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/memstore"
)

// TestMiddlewareSuite runs the middleware's store-facing guarantees, the
// suite sqlitestore and pgstore run on theirs (middlewaretest).
func TestMiddlewareSuite(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) { middlewaretest.Run(t, sc.open) })
	}
}

// storeCases are the backends the middleware's tests run on. The root
// module requires no database driver, so they are memstore's; each store's
// module proves the store with the conformance suite (storetest), and runs
// the middleware's own suite (middlewaretest) on it.
func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(t *testing.T) idem.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}
