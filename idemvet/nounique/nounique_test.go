package nounique_test

import (
	"os"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/nounique"
)

func TestNoUnique(t *testing.T) {
	vettest.Run(t, nounique.Analyzer, "nounique")
}

func TestUniqueFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, vettest.Dir(), nounique.Analyzer, "nouniquefix")
}

// The idem stores' own migrations pass.
func TestStoreMigrations(t *testing.T) {
	for _, f := range []string{"../../pgstore/migrations/0001_records.sql", "../../mysqlstore/migrations/0001_create_records.sql", "../../sqlitestore/migrations/0001_records.sql"} {
		b, err := readFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := nounique.Check(string(b)); len(got) != 0 {
			t.Errorf("%s: %v", f, got)
		}
	}
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }
