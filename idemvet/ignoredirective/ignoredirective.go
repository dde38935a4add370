// Package ignoredirective checks //idem:ignore directives.
package ignoredirective

import (
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report //idem:ignore directives without a reason or naming no idem analyzer

A finding of the idem analyzers is silenced by a comment on its line or
the line before it:

	//idem:ignore keyentropy the request id is logged, not used as a key

A directive may name several analyzers, separated by commas. The reason
is required: an exception nobody can read is a finding waiting
to be refactored back into a bug. A directive without one, or naming an
analyzer that does not exist, silences nothing and is reported here. In
SQL and Prometheus rule files the same directive is written in their
comment syntax (-- idem:ignore nounique …, # idem:ignore stalenessalert …)
and checked by those analyzers.`

// Analyzer is the ignoredirective analyzer.
var Analyzer = &analysis.Analyzer{
	Name: "ignoredirective",
	Doc:  Doc,
	URL:  "https://github.com/idemkit/idem/blob/main/docs/vet.md#idemignore",
	Run:  run,
}

func run(pass *analysis.Pass) (any, error) {
	for _, f := range pass.Files {
		for _, d := range vetutil.GoDirectives(pass.Fset, f) {
			if vetutil.InTestFile(pass.Fset.Position(d.Pos)) {
				continue
			}
			switch {
			case d.Analyzer == "":
				pass.Reportf(d.Pos, "idem:ignore directive names no analyzer: write //idem:ignore ANALYZER REASON (one of %s)", strings.Join(vetutil.Names, ", "))
			case unknown(d.Analyzer) != "":
				pass.Reportf(d.Pos, "idem:ignore directive names %q, which is not an idem analyzer (one of %s)", unknown(d.Analyzer), strings.Join(vetutil.Names, ", "))
			case d.Reason == "":
				pass.Reportf(d.Pos, "idem:ignore directive without a reason: say why the %s finding does not apply (//idem:ignore %s REASON)", d.Analyzer, d.Analyzer)
			}
		}
	}
	return nil, nil
}

// unknown is the first name in a comma-separated list that is not an idem
// analyzer, or "".
func unknown(list string) string {
	for _, n := range strings.Split(list, ",") {
		if !vetutil.KnownName(n) {
			return n
		}
	}
	return ""
}
