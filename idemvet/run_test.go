package idemvet_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemvet"
)

// TestRun: Run over the fixture module finds keyentropy's red flag in
// pay.go, lists the one an //idem:ignore directive silenced with its
// reason, and drops test files' findings unless Tests is set. (The idem
// vet command's flags, output and exit codes are tested in cmd/idem.)
func TestRun(t *testing.T) {
	t.Setenv("GOWORK", "off")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(wd, "testdata", "mod")
	rep, err := idemvet.Run(idemvet.Options{Dir: dir}, "./pay")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || !strings.HasPrefix(rep.Findings[0].Posn, filepath.Join("pay", "pay.go")+":12:") || rep.Findings[0].Analyzer != "keyentropy" {
		t.Errorf("findings = %+v, want keyentropy in pay.go:12", rep.Findings)
	}
	if len(rep.Silenced) != 1 || rep.Silenced[0].Reason != "a one-shot trace request, never retried" {
		t.Errorf("silenced = %+v", rep.Silenced)
	}
	rep, err = idemvet.Run(idemvet.Options{Dir: dir, Tests: true}, "./pay")
	if err != nil || len(rep.Findings) != 2 {
		t.Errorf("with Tests: %+v, %v; want the test file's finding too", rep, err)
	}
	if _, err := idemvet.Run(idemvet.Options{Dir: dir}, "./nosuchdir/..."); err == nil {
		t.Error("a pattern matching nothing ran")
	}
}

// Every analyzer documents its danger and its fix.
func TestAnalyzersDocumented(t *testing.T) {
	for _, a := range idemvet.Analyzers() {
		if !strings.Contains(a.Doc, "\n\n") || !strings.Contains(a.Doc, "Fix") && a.Name != "ignoredirective" {
			t.Errorf("%s: Doc has no explanation or no fix:\n%s", a.Name, a.Doc)
		}
	}
}
