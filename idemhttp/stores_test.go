package idemhttp_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(t *testing.T) idem.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}
