package reconcile_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile/reconciletest"
)

func TestMemstore(t *testing.T) {
	reconciletest.Run(t, func(*testing.T) idem.Store { return memstore.New() })
}
