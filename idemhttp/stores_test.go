package idemhttp_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// storeCases are the backends the middleware's tests run on. The root
// module requires no database driver, so they are memstore's; each store's
// module proves the store equal to it with the conformance suite
// (storetest), which the middleware relies on and nothing more.
func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(t *testing.T) idem.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}
