// Package plugin registers idem's analyzers as a golangci-lint module
// plugin. Build a custom golangci-lint with it (.custom-gcl.yml):
//
//	version: v2.5.0
//	plugins:
//	  - module: github.com/idemkit/idem/idemvet
//	    import: github.com/idemkit/idem/idemvet/plugin
//	    version: latest
//
// and enable it in .golangci.yml:
//
//	linters:
//	  enable: [idemvet]
//	  settings:
//	    custom:
//	      idemvet:
//	        type: module
//	        settings:
//	          testfiles: false
//
// testfiles reports findings in _test.go files too (default false).
package plugin

import (
	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet"
	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

func init() { register.Plugin("idemvet", New) }

// Settings are the plugin's settings in .golangci.yml.
type Settings struct {
	// TestFiles reports findings in _test.go files. Defaults to false.
	TestFiles bool `json:"testfiles"`
}

// New is the plugin's constructor, called by golangci-lint with the
// settings from its configuration.
func New(conf any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](conf)
	if err != nil {
		return nil, err
	}
	vetutil.SetTestFiles(s.TestFiles)
	return linter{}, nil
}

type linter struct{}

// BuildAnalyzers returns idem's analyzers.
func (linter) BuildAnalyzers() ([]*analysis.Analyzer, error) { return idemvet.Analyzers(), nil }

// GetLoadMode asks for type information, which every analyzer uses.
func (linter) GetLoadMode() string { return register.LoadModeTypesInfo }
