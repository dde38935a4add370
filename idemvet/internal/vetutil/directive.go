// Package vetutil holds what the idem analyzers share: the //idem:ignore
// directive, reporting that honours it, type helpers, and the scan of a
// package's SQL and rule files.
package vetutil

import (
	"go/ast"
	"go/token"
	"reflect"
	"strings"
	"sync/atomic"

	"golang.org/x/tools/go/analysis"
)

// Names are the analyzers a directive may name.
var Names = []string{
	"keyentropy", "checkthenact", "unkeyedretry", "sharednamespace",
	"retention", "unkeyedtool", "nounique", "stalenessalert",
}

// KnownName reports whether name is one of [Names].
func KnownName(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}

// Directive is one "idem:ignore ANALYZER REASON" comment.
type Directive struct {
	Pos      token.Pos
	File     string
	Line     int
	Analyzer string
	Reason   string
}

const marker = "idem:ignore"

// Names reports whether the directive names analyzer; a directive may name
// several, separated by commas: //idem:ignore keyentropy,sharednamespace …
func (d Directive) Names(analyzer string) bool {
	for _, n := range strings.Split(d.Analyzer, ",") {
		if n == analyzer {
			return true
		}
	}
	return false
}

// ParseDirective parses the text of one comment (without its // or #
// or -- leader). ok is false when the text is not a directive at all.
func ParseDirective(text string) (analyzer, reason string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, marker) {
		return "", "", false
	}
	rest := text[len(marker):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false
	}
	fields := strings.Fields(rest)
	if len(fields) > 0 {
		analyzer = fields[0]
	}
	if len(fields) > 1 {
		reason = strings.Join(fields[1:], " ")
	}
	return analyzer, reason, true
}

// GoDirectives returns the directives in a Go file's comments.
func GoDirectives(fset *token.FileSet, f *ast.File) []Directive {
	var out []Directive
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			text, ok := strings.CutPrefix(c.Text, "//")
			if !ok {
				continue
			}
			// A second comment on the line ("// want …") is not part
			// of the reason.
			text, _, _ = strings.Cut(text, "//")
			a, r, ok := ParseDirective(text)
			if !ok {
				continue
			}
			p := fset.Position(c.Pos())
			out = append(out, Directive{Pos: c.Pos(), File: p.Filename, Line: p.Line, Analyzer: a, Reason: r})
		}
	}
	return out
}

// LineDirectives returns the directives in a non-Go file, written in its
// comment syntax: "-- idem:ignore nounique reason" in SQL, "# idem:ignore
// stalenessalert reason" in YAML. base is the file's base Pos in the
// pass's file set.
func LineDirectives(name string, content []byte, tf *token.File) []Directive {
	var out []Directive
	off := 0
	for i, line := range strings.SplitAfter(string(content), "\n") {
		for _, lead := range []string{"--", "#", "//"} {
			j := strings.Index(line, lead+" "+marker)
			if j < 0 {
				j = strings.Index(line, lead+marker)
			}
			if j < 0 {
				continue
			}
			a, r, ok := ParseDirective(line[j+len(lead):])
			if ok {
				out = append(out, Directive{Pos: tf.Pos(off + j), File: name, Line: i + 1, Analyzer: a, Reason: r})
			}
			break
		}
		off += len(line)
	}
	return out
}

// Suppressed is one finding that a directive silenced.
type Suppressed struct {
	Posn     token.Position
	Analyzer string
	Message  string
	Reason   string
}

// Result is what every idem analyzer returns: the findings its directives
// silenced, so that a driver can list them.
type Result struct {
	Suppressed []Suppressed
}

// ResultType is the analyzers' [analysis.Analyzer.ResultType].
var ResultType = reflect.TypeOf((*Result)(nil))

// Reporter reports an analyzer's findings, honouring //idem:ignore
// directives that name it and give a reason. A directive covers a finding
// on its own line or on the line after it.
type Reporter struct {
	pass   *analysis.Pass
	dirs   map[string]map[int]Directive // file -> line -> directive
	seen   map[token.Pos]bool
	Result *Result
}

// NewReporter reads the directives of the pass's Go files.
func NewReporter(pass *analysis.Pass) *Reporter {
	r := &Reporter{pass: pass, dirs: map[string]map[int]Directive{}, seen: map[token.Pos]bool{}, Result: &Result{}}
	for _, f := range pass.Files {
		r.Add(GoDirectives(pass.Fset, f))
	}
	return r
}

// Add makes more directives (from a non-Go file) known.
func (r *Reporter) Add(ds []Directive) {
	for _, d := range ds {
		if !d.Names(r.pass.Analyzer.Name) || d.Reason == "" {
			continue
		}
		m := r.dirs[d.File]
		if m == nil {
			m = map[int]Directive{}
			r.dirs[d.File] = m
		}
		m[d.Line] = d
	}
}

// testFiles is whether findings in _test.go files are reported.
var testFiles atomic.Bool

// SetTestFiles sets whether findings in _test.go files are reported. They
// are not by default: tests build the failures on purpose (a test of a
// dedup store makes duplicates, a test of a retention check a short TTL).
func SetTestFiles(on bool) { testFiles.Store(on) }

// TestFiles reports whether findings in _test.go files are reported.
func TestFiles() bool { return testFiles.Load() }

// InTestFile reports whether p is in a _test.go file that is not to be
// reported.
func InTestFile(p token.Position) bool {
	return strings.HasSuffix(p.Filename, "_test.go") && !testFiles.Load()
}

// Report reports d unless a directive covers it or it is in a test file
// (see [SetTestFiles]); one finding per position.
func (r *Reporter) Report(d analysis.Diagnostic) {
	if r.seen[d.Pos] {
		return
	}
	r.seen[d.Pos] = true
	p := r.pass.Fset.Position(d.Pos)
	if InTestFile(p) {
		return
	}
	if m := r.dirs[p.Filename]; m != nil {
		for _, line := range []int{p.Line, p.Line - 1} {
			if dir, ok := m[line]; ok {
				r.Result.Suppressed = append(r.Result.Suppressed, Suppressed{Posn: p, Analyzer: r.pass.Analyzer.Name, Message: d.Message, Reason: dir.Reason})
				return
			}
		}
	}
	r.pass.Report(d)
}

// Reportf reports a finding at pos.
func (r *Reporter) Reportf(pos token.Pos, format string, args ...any) {
	r.Report(analysis.Diagnostic{Pos: pos, Message: sprintf(format, args...)})
}

// ReportBare reports the directives of a non-Go file that give no reason:
// they silence nothing, and an exception without a reason is a finding.
func (r *Reporter) ReportBare(ds []Directive) {
	for _, d := range ds {
		if d.Reason == "" {
			name := d.Analyzer
			if name == "" {
				name = "ANALYZER"
			}
			r.Reportf(d.Pos, "idem:ignore directive without a reason: say why the finding does not apply (idem:ignore %s REASON)", name)
		}
	}
}
