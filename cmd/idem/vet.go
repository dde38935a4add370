package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet"
)

func init() {
	commands["vet"] = command{"find idempotency red flags in Go code, SQL and alert rules (exit 3)", cmdVet}
}

// cmdVet runs idem's analyzers over Go packages, their SQL migrations and
// Prometheus rules: `idem vet ./...`. Exit 3 when it finds something. The
// analysis is idemvet's (idemvet.Run); idemvet's own binary, idem-vet, is
// the go vet -vettool form.
func cmdVet(_ context.Context, e *env, args []string) int {
	var about strings.Builder
	about.WriteString("Find the red flags of idempotency in Go code, SQL migrations and Prometheus\n" +
		"rules: exit 0 none, 3 findings, 1 could not run, 2 usage. Findings in _test.go\n" +
		"files are dropped unless --tests. Silence a finding with\n" +
		"//idem:ignore ANALYZER REASON on its line or the line before; what was\n" +
		"silenced is listed (-q: not).\n\nanalyzers:")
	for _, a := range idemvet.Analyzers() {
		fmt.Fprintf(&about, "\n  %-16s %s", a.Name, strings.SplitN(a.Doc, "\n", 2)[0])
	}
	f := e.newFlags("vet", "idem vet [--json] [--tests] [--only A,B] [-q] [packages]", about.String(), "idem vet ./...")
	asJSON := f.Bool("json", false, "print the report as JSON (idemvet.Report: findings, silenced, packages; see docs/cli.md)")
	tests := f.Bool("tests", false, "also report findings in _test.go files (tests build failures on purpose)")
	only := f.String("only", "", "comma-separated analyzers to run (default all)")
	quiet := f.Bool("q", false, "do not list silenced findings")
	patterns, code, ok := f.parse(args)
	if !ok {
		return code
	}
	opts := idemvet.Options{Tests: *tests}
	if *only != "" {
		byName := map[string]*analysis.Analyzer{}
		for _, a := range idemvet.Analyzers() {
			byName[a.Name] = a
		}
		for _, n := range strings.Split(*only, ",") {
			a, ok := byName[strings.TrimSpace(n)]
			if !ok {
				return f.usageError("--only: no analyzer %q", n)
			}
			opts.Analyzers = append(opts.Analyzers, a)
		}
	}
	rep, err := idemvet.Run(opts, patterns...)
	if err != nil {
		fmt.Fprintln(e.stderr, err) // idemvet's errors say "idem vet: …" already
		return exitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return f.fail(err)
		}
	} else {
		for _, fd := range rep.Findings {
			fmt.Fprintf(e.stdout, "%s: %s: %s\n", fd.Posn, fd.Analyzer, fd.Message)
		}
		if len(rep.Silenced) > 0 && !*quiet {
			fmt.Fprintf(e.stdout, "silenced by //idem:ignore (%d):\n", len(rep.Silenced))
			for _, s := range rep.Silenced {
				fmt.Fprintf(e.stdout, "  %s: %s: %s\n", s.Posn, s.Analyzer, s.Reason)
			}
		}
	}
	if len(rep.Findings) > 0 {
		return exitFindings
	}
	return exitOK
}
