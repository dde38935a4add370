// Package nounique finds dedup tables without a unique constraint on
// their key.
package nounique

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report dedup tables created without a PRIMARY KEY or UNIQUE on their key

The unique constraint is the entire mechanism of a dedup store: two
concurrent claimers of one key meet at it, and exactly one wins. Without
it both inserts succeed and both run the effect. nounique reads the SQL
of the module (*.sql files beside a package or in a directory below it
that holds no package, and string literals in Go code) and reports a
CREATE TABLE whose name looks like a dedup table (idempotency, dedup,
processed, inbox, seen…) with no PRIMARY KEY or UNIQUE covering its key
column (key, idempotency_key, message_id, event_id, …*_key), counting
CREATE UNIQUE INDEX and ALTER TABLE … ADD UNIQUE in the same text.

Fix: PRIMARY KEY (scope, key), or UNIQUE on the key column; a suggested
fix adds UNIQUE to the column. Suppress in SQL with
"-- idem:ignore nounique reason".`

// Analyzer is the nounique analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "nounique",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#nounique",
	Run:        run,
	ResultType: vetutil.ResultType,
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	for _, f := range vetutil.PackageFiles(pass, ".sql") {
		ds := vetutil.LineDirectives(f.Name, f.Content, f.TF)
		rep.Add(ds)
		rep.ReportBare(ds)
		for _, fd := range Check(string(f.Content)) {
			report(rep, f.Pos(fd.Offset), fd, func(off int) token.Pos { return f.Pos(off) })
		}
	}
	for _, file := range pass.Files {
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || !strings.Contains(strings.ToLower(lit.Value), "table") {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			// Offsets map onto the source when the literal is raw or
			// has no escapes.
			exact := lit.Value[0] == '`' && !strings.Contains(lit.Value, "\r") || !strings.Contains(lit.Value, `\`)
			for _, fd := range Check(s) {
				at := lit.Pos()
				var fix func(int) token.Pos
				if exact {
					at = lit.Pos() + token.Pos(1+fd.Offset)
					fix = func(off int) token.Pos { return lit.Pos() + token.Pos(1+off) }
				}
				report(rep, at, fd, fix)
			}
			return true
		})
	}
	return rep.Result, nil
}

func report(rep *vetutil.Reporter, at token.Pos, fd Finding, pos func(int) token.Pos) {
	d := analysis.Diagnostic{Pos: at, Message: fd.Message}
	if fd.FixAt >= 0 && pos != nil {
		p := pos(fd.FixAt)
		d.SuggestedFixes = []analysis.SuggestedFix{{
			Message:   "make " + fd.Column + " UNIQUE",
			TextEdits: []analysis.TextEdit{{Pos: p, End: p, NewText: []byte(" UNIQUE")}},
		}}
	}
	rep.Report(d)
}
