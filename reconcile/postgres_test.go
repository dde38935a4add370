package reconcile_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
)

func TestPostgres(t *testing.T) {
	runSuite(t, func(t *testing.T) idem.Store {
		st, _ := pgtest.Store(t)
		return st
	})
}
