// Package idemvet holds idem's analyzers: static checks for the red flags
// of idempotency (keys made from uuid or the clock, check-then-act, retries
// without keys, shared key namespaces, short retention, MCP tools without
// keys, dedup tables without a unique constraint, reconciliation alerts
// without staleness) built on golang.org/x/tools/go/analysis.
//
// Use them as `idem vet ./...` (the idem command, which calls [Run]), as `go vet
// -vettool=$(which idem-vet) ./...` with cmd/idem-vet, or from
// golangci-lint through the plugin package. Each analyzer's Doc explains
// the danger and the fix; docs/vet.md lists them with examples.
//
// A finding is silenced by a directive on its line or the line before,
// which must name the analyzer and give a reason:
//
//	//idem:ignore keyentropy the request id is logged, never used as a key
package idemvet

import (
	"github.com/idemkit/idem/idemvet/checkthenact"
	"github.com/idemkit/idem/idemvet/ignoredirective"
	"github.com/idemkit/idem/idemvet/keyentropy"
	"github.com/idemkit/idem/idemvet/nounique"
	"github.com/idemkit/idem/idemvet/retention"
	"github.com/idemkit/idem/idemvet/sharednamespace"
	"github.com/idemkit/idem/idemvet/stalenessalert"
	"github.com/idemkit/idem/idemvet/unkeyedretry"
	"github.com/idemkit/idem/idemvet/unkeyedtool"

	"golang.org/x/tools/go/analysis"
)

// Analyzers returns every idem analyzer, the directive check last.
func Analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		keyentropy.Analyzer,
		checkthenact.Analyzer,
		unkeyedretry.Analyzer,
		sharednamespace.Analyzer,
		retention.Analyzer,
		unkeyedtool.Analyzer,
		nounique.Analyzer,
		stalenessalert.Analyzer,
		ignoredirective.Analyzer,
	}
}
