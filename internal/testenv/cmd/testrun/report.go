package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json), including the
// build events go test emits since Go 1.24.
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

// backendPrefix starts the message of a test skipped because a service it
// needs could not be reached (internal/testenv's Need, and the few tests
// that look for a program such as chromium or node).
const backendPrefix = "SKIP: "

// keptLines bounds the output kept per test and per package for the
// failure report.
const keptLines = 400

type pkgState struct {
	name    string
	started time.Time
	tests   map[string][]string // output per running test
	out     []string            // package-level output
	failed  []string            // tests that failed, in order
	failOut map[string][]string
}

type skip struct{ pkg, test, reason string }

type finished struct {
	name    string
	elapsed time.Duration
	result  string // ok, FAIL, none (no test files)
}

// report accumulates the events of one run and writes the progress and the
// summary to w.
type report struct {
	w         io.Writer
	prefix    string   // the root module's import path
	modules   []string // module directories, longest first
	allowSkip bool
	logFile   string
	now       func() time.Time

	begin    time.Time
	pkgs     map[string]*pkgState
	done     []finished
	perMod   map[string]int
	failures []*pkgState
	builds   map[string][]string
	buildBad []string
	backend  []skip
	byDesign []skip
}

func newReport(w io.Writer, prefix string, modules []string) *report {
	mods := slices.Clone(modules)
	sort.Slice(mods, func(i, j int) bool { return len(mods[i]) > len(mods[j]) })
	return &report{
		w: w, prefix: prefix, modules: mods, now: time.Now,
		pkgs: map[string]*pkgState{}, perMod: map[string]int{}, builds: map[string][]string{},
	}
}

// short names a package by its path in the repository ("idem" for the
// root package).
func (r *report) short(pkg string) string {
	if pkg == r.prefix {
		return "idem"
	}
	return strings.TrimPrefix(pkg, r.prefix+"/")
}

// module names the module directory a package belongs to ("." for the root).
func (r *report) module(pkg string) string {
	rel := r.short(pkg)
	if rel == "idem" {
		return "."
	}
	for _, m := range r.modules {
		if m != "." && (rel == m || strings.HasPrefix(rel, m+"/")) {
			return m
		}
	}
	return "."
}

func (r *report) state(pkg string, t time.Time) *pkgState {
	p := r.pkgs[pkg]
	if p == nil {
		p = &pkgState{name: pkg, started: t, tests: map[string][]string{}, failOut: map[string][]string{}}
		r.pkgs[pkg] = p
	}
	return p
}

func keep(lines []string, s string) []string {
	lines = append(lines, s)
	if len(lines) > keptLines {
		lines = lines[len(lines)-keptLines:]
	}
	return lines
}

// line takes one line of go test's output.
func (r *report) line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || (e.Action == "" && e.ImportPath == "") {
		// go test writes a few things outside the event stream (a module
		// download, a vet failure in some versions): pass them through.
		if s := strings.TrimRight(string(b), "\n"); s != "" {
			fmt.Fprintln(r.w, s)
		}
		return
	}
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	if r.begin.IsZero() {
		r.begin = e.Time
	}
	switch e.Action {
	case "build-output":
		r.builds[e.ImportPath] = keep(r.builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
		return
	case "build-fail":
		r.buildBad = append(r.buildBad, e.ImportPath)
		fmt.Fprintf(r.w, "BUILD FAIL  %s\n", e.ImportPath)
		for _, l := range r.builds[e.ImportPath] {
			fmt.Fprintf(r.w, "    %s\n", l)
		}
		return
	}
	if e.Package == "" {
		return
	}
	p := r.state(e.Package, e.Time)
	if e.Test == "" {
		switch e.Action {
		case "output":
			p.out = keep(p.out, strings.TrimRight(e.Output, "\n"))
		case "pass", "fail", "skip":
			r.packageDone(p, e)
		}
		return
	}
	switch e.Action {
	case "output":
		p.tests[e.Test] = keep(p.tests[e.Test], strings.TrimRight(e.Output, "\n"))
	case "pass":
		delete(p.tests, e.Test)
	case "skip":
		reason := skipReason(p.tests[e.Test])
		s := skip{pkg: r.short(e.Package), test: e.Test, reason: reason}
		if strings.HasPrefix(reason, backendPrefix) {
			s.reason = strings.TrimPrefix(reason, backendPrefix)
			r.backend = append(r.backend, s)
		} else {
			r.byDesign = append(r.byDesign, s)
		}
		delete(p.tests, e.Test)
	case "fail":
		p.failed = append(p.failed, e.Test)
		p.failOut[e.Test] = p.tests[e.Test]
		delete(p.tests, e.Test)
	}
}

// skipReason is the message a test gave t.Skip: its output without the
// run and result lines and without the file:line prefix.
func skipReason(out []string) string {
	var msg []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		// "name_test.go:12: message"
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") && !strings.Contains(t[:i], " ") {
			t = t[i+2:]
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

func (r *report) packageDone(p *pkgState, e event) {
	delete(r.pkgs, e.Package)
	name := r.short(e.Package)
	mod := r.module(e.Package)
	r.perMod[mod]++
	el := time.Duration(e.Elapsed * float64(time.Second))
	res := "ok"
	switch {
	case e.Action == "fail":
		res = "FAIL"
		r.failures = append(r.failures, p)
	case e.Action == "skip":
		res = "none"
	}
	r.done = append(r.done, finished{name: name, elapsed: el, result: res})
	if res == "none" {
		return // a package without tests: counted, not printed
	}
	note := ""
	if res == "FAIL" && e.FailedBuild != "" {
		note = "  (build failed: " + e.FailedBuild + ")"
	}
	fmt.Fprintf(r.w, "%-4s  %-44s %7s   [%d done · module %s: %d]%s\n",
		res, name, el.Round(100*time.Millisecond), len(r.done), mod, r.perMod[mod], note)
}

// progress names the packages still running, so a long run is never silent.
func (r *report) progress(now time.Time) {
	if r.begin.IsZero() {
		fmt.Fprintln(r.w, "… building the test binaries")
		return
	}
	var running []*pkgState
	for _, p := range r.pkgs {
		running = append(running, p)
	}
	sort.Slice(running, func(i, j int) bool { return running[i].started.Before(running[j].started) })
	var names []string
	for i, p := range running {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(running)-4))
			break
		}
		names = append(names, fmt.Sprintf("%s (%s)", r.short(p.name), now.Sub(p.started).Round(time.Second)))
	}
	doing := "building the next test binaries"
	if len(names) > 0 {
		doing = "running " + strings.Join(names, ", ")
	}
	fmt.Fprintf(r.w, "… %s: %d packages done; %s\n",
		now.Sub(r.begin).Round(time.Second), len(r.done), doing)
}

// finish writes the summary and returns the exit status.
func (r *report) finish() int {
	w := r.w
	total := time.Duration(0)
	if !r.begin.IsZero() {
		total = r.now().Sub(r.begin)
	}
	var ok, none int
	for _, d := range r.done {
		switch d.result {
		case "ok":
			ok++
		case "none":
			none++
		}
	}
	fmt.Fprintf(w, "\n== %d packages: %d ok, %d failed, %d without tests; %s\n",
		len(r.done), ok, len(r.failures), none, total.Round(time.Second))

	slow := slices.Clone(r.done)
	sort.Slice(slow, func(i, j int) bool { return slow[i].elapsed > slow[j].elapsed })
	if len(slow) > 8 {
		slow = slow[:8]
	}
	var sl []string
	for _, d := range slow {
		if d.elapsed > 0 {
			sl = append(sl, fmt.Sprintf("%s %s", d.name, d.elapsed.Round(time.Second)))
		}
	}
	if len(sl) > 0 {
		fmt.Fprintf(w, "slowest: %s\n", strings.Join(sl, ", "))
	}

	if len(r.byDesign) > 0 {
		fmt.Fprintf(w, "\nskipped by design (%d tests; not a failure):\n", len(r.byDesign))
		for _, g := range group(r.byDesign) {
			fmt.Fprintf(w, "  %3d  %s\n       %s\n", len(g), g[0].reason, names(g))
		}
	}
	if len(r.backend) > 0 {
		verdict := "fails the run; IDEM_ALLOW_SKIP=1 allows it"
		if r.allowSkip {
			verdict = "allowed by IDEM_ALLOW_SKIP=1"
		}
		fmt.Fprintf(w, "\nSKIPPED BACKENDS (%d tests; %s):\n", len(r.backend), verdict)
		for _, g := range group(r.backend) {
			fmt.Fprintf(w, "  %3d  %s\n       %s\n", len(g), g[0].reason, names(g))
		}
	} else {
		fmt.Fprintln(w, "\nskipped backends: none")
	}
	// The failures come last, after the skip lists, so that the tail of a
	// long log (what CI shows of a failed run) holds them.
	for _, p := range r.failures {
		fmt.Fprintf(w, "\n--- FAIL %s\n", r.short(p.name))
		for _, t := range p.failed {
			// A parent fails with its subtest: print the innermost output.
			if len(p.failOut[t]) == 0 && hasChild(p.failed, t) {
				continue
			}
			fmt.Fprintf(w, "  %s\n", t)
			for _, l := range p.failOut[t] {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		if len(p.failed) == 0 {
			for _, l := range p.out {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
	for _, b := range r.buildBad {
		fmt.Fprintf(w, "\n--- BUILD FAIL %s\n", b)
	}
	// Packages that started and never finished: go test died or was cut.
	var cut []string
	for name := range r.pkgs {
		cut = append(cut, r.short(name))
	}
	sort.Strings(cut)
	if len(cut) > 0 {
		fmt.Fprintf(w, "\nunfinished (go test stopped before they ended): %s\n", strings.Join(cut, ", "))
	}

	if r.logFile != "" {
		fmt.Fprintf(w, "events: %s\n", r.logFile)
	}

	failed := len(r.failures) > 0 || len(r.buildBad) > 0 || len(cut) > 0 || len(r.done) == 0
	switch {
	case failed:
		fmt.Fprintln(w, "result: FAIL"+r.failedNames(cut))
		return 1
	case len(r.backend) > 0 && !r.allowSkip:
		fmt.Fprintln(w, "result: FAIL (backends skipped)")
		return 1
	}
	fmt.Fprintln(w, "result: PASS")
	return 0
}

func hasChild(tests []string, t string) bool {
	for _, o := range tests {
		if strings.HasPrefix(o, t+"/") {
			return true
		}
	}
	return false
}

// group gathers skips by reason, largest group first.
func group(ss []skip) [][]skip {
	by := map[string][]skip{}
	var order []string
	for _, s := range ss {
		if _, ok := by[s.reason]; !ok {
			order = append(order, s.reason)
		}
		by[s.reason] = append(by[s.reason], s)
	}
	sort.SliceStable(order, func(i, j int) bool { return len(by[order[i]]) > len(by[order[j]]) })
	out := make([][]skip, 0, len(order))
	for _, k := range order {
		out = append(out, by[k])
	}
	return out
}

// names lists up to six of a group's tests as package.Test.
func names(g []skip) string {
	var n []string
	for i, s := range g {
		if i == 6 {
			n = append(n, fmt.Sprintf("and %d more", len(g)-6))
			break
		}
		n = append(n, path.Base(s.pkg)+"."+s.test)
	}
	return strings.Join(n, ", ")
}

// failedNames lists, for the result line, the innermost failed tests and
// the packages that failed without a failing test, failed to build or
// never ended (cut), at most eight.
func (r *report) failedNames(cut []string) string {
	var ns []string
	for _, p := range r.failures {
		short := r.short(p.name)
		if len(p.failed) == 0 {
			ns = append(ns, short)
		}
		for _, t := range p.failed {
			if !hasChild(p.failed, t) {
				ns = append(ns, short+"."+t)
			}
		}
	}
	ns = append(ns, r.buildBad...)
	ns = append(ns, cut...)
	if len(ns) == 0 {
		return ""
	}
	if len(ns) > 8 {
		ns = append(ns[:8], fmt.Sprintf("and %d more", len(ns)-8))
	}
	return " (" + strings.Join(ns, ", ") + ")"
}
