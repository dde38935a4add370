package idemvet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Finding is one diagnostic, as [Run] returns it.
type Finding struct {
	Posn     string `json:"posn"` // file:line:col, relative to the working directory when below it
	Analyzer string `json:"analyzer"`
	Message  string `json:"message"`
}

// Silenced is one finding an //idem:ignore directive silenced.
type Silenced struct {
	Finding
	Reason string `json:"reason"`
}

// Report is what [Run] found.
type Report struct {
	Findings []Finding  `json:"findings"`
	Silenced []Silenced `json:"silenced"`
	Packages int        `json:"packages"`
}

// Options configure [Run].
type Options struct {
	// Dir is the directory patterns are relative to. Defaults to the
	// working directory.
	Dir string
	// Tests reports findings in _test.go files too. Test files are always
	// loaded (a package's tests may hold its only key derivation), but
	// their findings are dropped by default: tests build the failures on
	// purpose. It sets [vetutil.SetTestFiles] for the run.
	Tests bool
	// Analyzers to run. Defaults to [Analyzers].
	Analyzers []*analysis.Analyzer
}

// Run loads the packages matching patterns (go list syntax, "./..."),
// runs the analyzers over them and returns their findings, sorted by
// position. An error means the packages could not be loaded or type
// checked, or an analyzer failed.
func Run(opts Options, patterns ...string) (*Report, error) {
	if len(opts.Analyzers) == 0 {
		opts.Analyzers = Analyzers()
	}
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
			packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule,
		Dir:   opts.Dir,
		Tests: true,
	}
	vetutil.SetTestFiles(opts.Tests)
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("idem vet: loading packages: %w", err)
	}
	var loadErrs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, e)
		}
	})
	if len(loadErrs) > 0 {
		return nil, fmt.Errorf("idem vet: %w", errors.Join(loadErrs...))
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("idem vet: no packages match %s", strings.Join(patterns, " "))
	}
	pkgs = dropTestDuplicates(pkgs)
	g, err := checker.Analyze(opts.Analyzers, pkgs, nil)
	if err != nil {
		return nil, fmt.Errorf("idem vet: %w", err)
	}
	base := opts.Dir
	if base == "" {
		base, _ = os.Getwd()
	}
	rep := &Report{Packages: len(pkgs), Findings: []Finding{}, Silenced: []Silenced{}}
	seen := map[Finding]bool{}
	var errs []error
	for _, act := range g.Roots {
		if act.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", act.Package.PkgPath, act.Analyzer.Name, act.Err))
			continue
		}
		for _, d := range act.Diagnostics {
			f := Finding{Posn: rel(base, act.Package.Fset.Position(d.Pos).String()), Analyzer: act.Analyzer.Name, Message: d.Message}
			if !seen[f] {
				seen[f] = true
				rep.Findings = append(rep.Findings, f)
			}
		}
		if r, ok := act.Result.(*vetutil.Result); ok && r != nil {
			for _, s := range r.Suppressed {
				f := Finding{Posn: rel(base, s.Posn.String()), Analyzer: s.Analyzer, Message: s.Message}
				if !seen[f] {
					seen[f] = true
					rep.Silenced = append(rep.Silenced, Silenced{Finding: f, Reason: s.Reason})
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("idem vet: %w", errors.Join(errs...))
	}
	sort.Slice(rep.Findings, func(i, j int) bool { return less(rep.Findings[i].Posn, rep.Findings[j].Posn) })
	sort.Slice(rep.Silenced, func(i, j int) bool { return less(rep.Silenced[i].Posn, rep.Silenced[j].Posn) })
	return rep, nil
}

// dropTestDuplicates keeps, of a package and its test variant, only the
// variant (which holds the same files and the tests), and drops the
// generated test mains.
func dropTestDuplicates(pkgs []*packages.Package) []*packages.Package {
	variant := map[string]bool{}
	for _, p := range pkgs {
		if strings.Contains(p.ID, " [") && !strings.HasSuffix(p.Name, "_test") {
			variant[p.PkgPath] = true
		}
	}
	var out []*packages.Package
	for _, p := range pkgs {
		switch {
		case strings.HasSuffix(p.ID, ".test") && p.Name == "main":
		case !strings.Contains(p.ID, " [") && variant[p.PkgPath]:
		default:
			out = append(out, p)
		}
	}
	return out
}

func rel(base, posn string) string {
	if base == "" || !filepath.IsAbs(posn) {
		return posn
	}
	if r, err := filepath.Rel(base, posn); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return posn
}

// less orders file:line:col positions by file, then numerically.
func less(a, b string) bool {
	fa, la, ca := split(a)
	fb, lb, cb := split(b)
	if fa != fb {
		return fa < fb
	}
	if la != lb {
		return la < lb
	}
	return ca < cb
}

func split(p string) (string, int, int) {
	var line, col int
	i := strings.LastIndexByte(p, ':')
	j := strings.LastIndexByte(p[:max(i, 0)], ':')
	if i < 0 || j < 0 {
		return p, 0, 0
	}
	fmt.Sscan(p[j+1:i], &line)
	fmt.Sscan(p[i+1:], &col)
	return p[:j], line, col
}
