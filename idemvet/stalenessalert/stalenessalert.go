// Package stalenessalert finds Prometheus rule files that alert on
// reconciliation counts and not on reconciliation staleness.
package stalenessalert

import (
	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report Prometheus rules that alert on reconciliation counts but not on staleness

Reconciliation is how you know the duplicate rate is zero, and a count
that stays flat looks the same whether nothing is wrong or reconciliation
stopped running. stalenessalert reads the Prometheus rule files of the
module (*.yml, *.yaml, *.rules beside a package or below it) and reports
a file with an alert on a reconciliation metric (reconcile, drift,
mismatch, settlement…) and no alert on an age or staleness of one (an
_age or oldest metric, a last-success timestamp, time() - …).

Fix: alert on idem_reconcile_oldest_unreconciled_age_seconds and on
time() - idem_reconcile_last_success_timestamp_seconds, as deploy/alerts.yml
does. Suppress with "# idem:ignore stalenessalert reason" on the line
before the alert.`

// Analyzer is the stalenessalert analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "stalenessalert",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#stalenessalert",
	Run:        run,
	ResultType: vetutil.ResultType,
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	for _, f := range vetutil.PackageFiles(pass, ".yml", ".yaml", ".rules") {
		rules, ok := Parse(f.Content)
		if !ok {
			continue
		}
		ds := vetutil.LineDirectives(f.Name, f.Content, f.TF)
		rep.Add(ds)
		rep.ReportBare(ds)
		for _, fd := range Check(rules) {
			rep.Reportf(f.TF.LineStart(fd.Line), "%s", fd.Message)
		}
	}
	return rep.Result, nil
}
