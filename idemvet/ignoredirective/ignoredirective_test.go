package ignoredirective_test

import (
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/idemvet/ignoredirective"
	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/internal/vetutil"
	"github.com/idemkit/idem/idemvet/keyentropy"
)

func TestIgnoreDirective(t *testing.T) {
	analysistest.Run(t, vettest.Dir(), ignoredirective.Analyzer, "ignoredirective")
}

// keyentropy honours the directive with a reason, lists what it silenced,
// and does not honour the one without.
func TestHonoured(t *testing.T) {
	res := analysistest.Run(recorder{}, vettest.Dir(), keyentropy.Analyzer, "ignoredirective")
	var reported []string
	for _, r := range res {
		for _, d := range r.Diagnostics {
			reported = append(reported, r.Pass.Fset.Position(d.Pos).String())
		}
		s := r.Result.(*vetutil.Result).Suppressed
		if len(s) != 1 || s[0].Posn.Line != 20 || s[0].Reason != "a test of key validation, not an idempotency key" {
			t.Errorf("suppressed = %+v", s)
		}
	}
	if len(reported) != 1 || !strings.Contains(reported[0], "a.go:10:") {
		t.Errorf("reported = %v, want only the finding under the directive without a reason (a.go:10)", reported)
	}
}

// recorder swallows analysistest's complaints: this test checks the
// results itself.
type recorder struct{}

func (recorder) Errorf(string, ...any) {}
