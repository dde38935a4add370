package checkthenact_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet/checkthenact"
	"github.com/idemkit/idem/idemvet/internal/vettest"
)

func TestCheckThenAct(t *testing.T) {
	vettest.Run(t, checkthenact.Analyzer, "checkthenact")
}
