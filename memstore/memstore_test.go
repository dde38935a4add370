package memstore_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{NewStore: func(t *testing.T) idem.Store { return memstore.New() }})
}
