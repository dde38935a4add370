// Package vettest runs an analyzer over the shared testdata with
// analysistest, and checks findings in non-Go files (SQL, YAML) against
// `want "regexp"` markers written in those files' own comments.
package vettest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// Dir is the shared testdata directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// recorder collects analysistest's complaints so that those about non-Go
// files can be checked here instead.
type recorder struct {
	t    *testing.T
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// wantRE matches `want "re"` (a finding on this line) and `want-next
// "re"` (on the next line, for a line that cannot carry a marker).
var wantRE = regexp.MustCompile("want(-next)? [\"`](.*)[\"`]")

// Run runs a over the testdata packages and checks the `// want`
// expectations of Go files and the `want` markers of other files.
func Run(t *testing.T, a *analysis.Analyzer, pkgs ...string) []*analysistest.Result {
	t.Helper()
	rec := &recorder{t: t}
	results := analysistest.Run(rec, Dir(), a, pkgs...)
	for _, e := range rec.errs {
		if name, _, _ := strings.Cut(e, ":"); !strings.HasSuffix(name, ".go") && strings.Contains(e, "unexpected diagnostic") {
			continue // checked below
		}
		t.Error(e)
	}
	type lineKey struct {
		file string
		line int
	}
	got := map[lineKey][]string{}
	files := map[string]bool{}
	for _, r := range results {
		for _, d := range r.Diagnostics {
			p := r.Pass.Fset.Position(d.Pos)
			if strings.HasSuffix(p.Filename, ".go") {
				continue
			}
			files[p.Filename] = true
			got[lineKey{p.Filename, p.Line}] = append(got[lineKey{p.Filename, p.Line}], d.Message)
		}
	}
	// Expectations from every non-Go file of the packages.
	for _, pkg := range pkgs {
		dir := filepath.Join(Dir(), "src", pkg)
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for i, line := range strings.Split(string(b), "\n") {
				m := wantRE.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				k := lineKey{path, i + 1}
				if m[1] != "" {
					k.line++
				}
				re, err := regexp.Compile(m[2])
				if err != nil {
					t.Errorf("%s:%d: bad want regexp: %v", path, i+1, err)
					continue
				}
				matched := -1
				for j, msg := range got[k] {
					if re.MatchString(msg) {
						matched = j
						break
					}
				}
				if matched < 0 {
					t.Errorf("%s:%d: no diagnostic matching %q (got %q)", path, k.line, m[2], got[k])
					continue
				}
				got[k] = append(got[k][:matched], got[k][matched+1:]...)
			}
			return nil
		})
	}
	for k, msgs := range got {
		for _, m := range msgs {
			t.Errorf("%s:%d: unexpected diagnostic: %s", k.file, k.line, m)
		}
	}
	return results
}
