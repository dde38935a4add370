package reconcile_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func TestMemstore(t *testing.T) {
	runSuite(t, func(*testing.T) idem.Store { return memstore.New() })
}
