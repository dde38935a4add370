package plugin_test

import (
	"testing"

	"github.com/golangci/plugin-module-register/register"

	"github.com/idemkit/idem/idemvet"
	"github.com/idemkit/idem/idemvet/internal/vetutil"
	_ "github.com/idemkit/idem/idemvet/plugin"
)

func TestRegistered(t *testing.T) {
	newPlugin, err := register.GetPlugin("idemvet")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"testfiles": true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vetutil.SetTestFiles(false) })
	if !vetutil.TestFiles() {
		t.Error("testfiles setting not applied")
	}
	as, err := p.BuildAnalyzers()
	if err != nil || len(as) != len(idemvet.Analyzers()) {
		t.Errorf("BuildAnalyzers = %d, %v", len(as), err)
	}
	if p.GetLoadMode() != register.LoadModeTypesInfo {
		t.Errorf("load mode %q", p.GetLoadMode())
	}
	if _, err := newPlugin(map[string]any{"nosuch": 1}); err == nil {
		t.Error("unknown setting accepted")
	}
}
