package sharednamespace_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/sharednamespace"
)

func TestSharedNamespace(t *testing.T) {
	vettest.Run(t, sharednamespace.Analyzer, "sharednamespace")
}

func TestAddVersionFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, vettest.Dir(), sharednamespace.Analyzer, "sharednamespacefix")
}
