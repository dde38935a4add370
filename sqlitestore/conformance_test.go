package sqlitestore

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the shared suite with a fresh database file per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{NewStore: func(t *testing.T) idem.Store { return newStore(t) }})
}
