package unkeyedretry_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/unkeyedretry"
)

func TestUnkeyedRetry(t *testing.T) {
	vettest.Run(t, unkeyedretry.Analyzer, "unkeyedretry")
}
