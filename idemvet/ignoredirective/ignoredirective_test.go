package ignoredirective_test

import (
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
	var rec recorder
	res := analysistest.Run(&rec, vettest.Dir(), keyentropy.Analyzer, "ignoredirective")
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
	if len(reported) != 1 || !contains(reported[0], "a.go:10:") {
		t.Errorf("reported = %v, want only the finding under the directive without a reason (a.go:10)", reported)
	}
}

type recorder struct{ errs []string }

func (r *recorder) Errorf(string, ...any) {}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
