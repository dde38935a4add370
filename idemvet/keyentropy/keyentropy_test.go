package keyentropy_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/keyentropy"
)

func TestKeyEntropy(t *testing.T) {
	vettest.Run(t, keyentropy.Analyzer, "keyentropy")
}
