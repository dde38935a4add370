package retention_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/retention"
)

func TestRetention(t *testing.T) {
	vettest.Run(t, retention.Analyzer, "retention/...", "retentionok")
}

func TestCoverFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, vettest.Dir(), retention.Analyzer, "retentionfix")
}
