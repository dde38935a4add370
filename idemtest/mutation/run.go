package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Status is how a mutation fared.
type Status string

const (
	// Killed: a test failed with the mutation applied. The only pass.
	Killed Status = "killed"
	// Survived: every test passed with the guard gone.
	Survived Status = "survived"
	// Hung: the tests did not finish within the timeout.
	Hung Status = "hung"
	// Invalid: the edit could not be made exactly once, the mutated tree
	// does not compile, or no test ran.
	Invalid Status = "invalid"
	// NotRun: the run was stopped (its context ended) before this one.
	NotRun Status = "not run"
)

// Result is one mutation's outcome.
type Result struct {
	Mutation Mutation
	Status   Status
	// Reason says why, in a line: the tests that failed (killed), what was
	// wrong (invalid), the timeout (hung).
	Reason string
	// Killers are the tests that failed, package-qualified.
	Killers []string
	// Output is the end of go test's output, kept when the mutation was
	// not killed (and for killed ones with Config.KeepOutput).
	Output   string
	Duration time.Duration
}

// Config configures [Run].
type Config struct {
	// Root is the tree to copy and mutate (a module, or a workspace with
	// its go.work). Defaults to ".".
	Root string
	// Scratch is the directory the tree is copied into; it must not exist
	// or be empty. Defaults to a new temporary directory, removed after
	// the run unless Keep is set.
	Scratch string
	// Keep leaves the scratch copy in place after the run.
	Keep bool
	// Exclude names files and directories (base names, such as
	// "node_modules") not copied, besides .git. Defaults to none.
	Exclude []string
	// Timeout bounds each mutation's tests (go test -timeout) when the
	// mutation gives none. Defaults to 5m.
	Timeout time.Duration
	// BuildAllowance is how much longer than its tests' timeout a
	// mutation's whole go test command (compiling included) may take
	// before it is stopped and reported hung. Defaults to 5m.
	BuildAllowance time.Duration
	// Go is the go command. Defaults to "go".
	Go string
	// TestFlags are added to every go test command (for example "-race").
	TestFlags []string
	// Env holds KEY=VALUE pairs added to go test's environment, after the
	// process's own (which is passed on: IDEM_REQUIRE_SERVICES=1 and the
	// services' addresses reach the tests).
	Env []string
	// Baseline runs the selected mutations' tests once on the unmutated
	// copy first, and refuses to go on when they fail: a kill means
	// something only if the tests pass without the mutation.
	Baseline bool
	// KeepOutput keeps the output of killed mutations too.
	KeepOutput bool
	// Progress receives a line per mutation as it is run. Defaults to
	// discarding.
	Progress io.Writer

	module string // the root's module path, to name packages by
}

func (c *Config) fill() {
	if c.Root == "" {
		c.Root = "."
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.BuildAllowance <= 0 {
		c.BuildAllowance = 5 * time.Minute
	}
	if c.Go == "" {
		c.Go = "go"
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	c.module = modulePath(c.Root)
}

// modulePath is the module path of the go.mod at root, or "".
func modulePath(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// ErrBaseline is matched (errors.Is) by Run's error when the tests fail
// on the unmutated tree.
var ErrBaseline = errors.New("mutation: the tests fail without any mutation")

// Run copies cfg.Root to a scratch directory once and runs each mutation
// in turn there: apply, go test, revert. It returns every mutation's
// result, in the order given; the error is for a run that could not be
// made (the copy, the baseline). When ctx ends the mutations not yet run
// are reported [NotRun].
func Run(ctx context.Context, cfg Config, muts []Mutation) (*Report, error) {
	cfg.fill()
	start := time.Now()
	scratch, cleanup, err := prepareScratch(cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Progress, "mutation: copied %s to %s\n", cfg.Root, scratch)
	rep := &Report{}
	if cfg.Baseline {
		if err := baseline(ctx, cfg, scratch, muts); err != nil {
			return nil, err
		}
	}
	width := len(fmt.Sprint(len(muts)))
	for i, m := range muts {
		if ctx.Err() != nil {
			rep.Results = append(rep.Results, Result{Mutation: m, Status: NotRun, Reason: "the run was stopped"})
			continue
		}
		fmt.Fprintf(cfg.Progress, "[%*d/%d] %s (%s) ... ", width, i+1, len(muts), m.ID, m.Item)
		r := runOne(ctx, cfg, scratch, m)
		if ctx.Err() != nil && r.Status != Killed {
			r.Status, r.Reason = NotRun, "the run was stopped"
		}
		fmt.Fprintf(cfg.Progress, "%s in %s%s\n", r.Status, r.Duration.Round(100*time.Millisecond), reasonSuffix(r))
		if r.Status != Killed && r.Status != NotRun && r.Output != "" {
			fmt.Fprintf(cfg.Progress, "    %s\n    edit: %s\n%s\n", m.Source, m.File, indent(r.Output, "    | "))
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

func reasonSuffix(r Result) string {
	if r.Reason == "" {
		return ""
	}
	return ": " + r.Reason
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// Check verifies, without running anything, that every mutation's edit
// can be made exactly once in the tree at root. It returns the invalid
// ones.
func Check(root string, muts []Mutation) []Result {
	var bad []Result
	for _, m := range muts {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err == nil {
			_, err = Apply(src, m)
		}
		if err != nil {
			bad = append(bad, Result{Mutation: m, Status: Invalid, Reason: err.Error()})
		}
	}
	return bad
}

// runOne applies m in scratch, runs its tests and reverts it.
func runOne(ctx context.Context, cfg Config, scratch string, m Mutation) Result {
	start := time.Now()
	res := Result{Mutation: m}
	file := filepath.Join(scratch, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(file)
	var mutated []byte
	if err == nil {
		mutated, err = Apply(orig, m)
	}
	if err != nil {
		res.Status, res.Reason, res.Duration = Invalid, err.Error(), time.Since(start)
		return res
	}
	fi, err := os.Stat(file)
	if err == nil {
		err = os.WriteFile(file, mutated, fi.Mode().Perm())
	}
	if err != nil {
		res.Status, res.Reason, res.Duration = Invalid, err.Error(), time.Since(start)
		return res
	}
	defer func() {
		if err := os.WriteFile(file, orig, fi.Mode().Perm()); err != nil {
			// The copy can no longer be trusted for the next mutation.
			panic(fmt.Sprintf("mutation: reverting %s: %v", file, err))
		}
	}()
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = cfg.Timeout
	}
	out := goTest(ctx, cfg, scratch, m.Packages, m.Run, timeout, m.Env)
	res.Duration = time.Since(start)
	classify(&res, out, timeout)
	if res.Status == Killed && !cfg.KeepOutput {
		res.Output = ""
	}
	return res
}

// testRun is what one go test command did.
type testRun struct {
	events   []testEvent
	stderr   string
	exitErr  error
	deadline bool // stopped by the allowance's deadline
	duration time.Duration
	module   string // the root's module path
}

type testEvent struct {
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Output      string
	FailedBuild string
}

// goTest runs go test -json on pkgs in dir.
func goTest(ctx context.Context, cfg Config, dir string, pkgs []string, run string, timeout time.Duration, env []string) testRun {
	args := []string{"test", "-json", "-count=1", "-vet=off", "-timeout", timeout.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, cfg.TestFlags...)
	args = append(args, pkgs...)
	cctx, cancel := context.WithTimeout(ctx, timeout+cfg.BuildAllowance)
	defer cancel()
	cmd := exec.CommandContext(cctx, cfg.Go, args...)
	cmd.Dir = dir
	cmd.Env = append(testEnv(), cfg.Env...)
	cmd.Env = append(cmd.Env, env...)
	killGroup(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	tr := testRun{stderr: stderr.String(), exitErr: err, duration: time.Since(start), module: cfg.module}
	tr.deadline = errors.Is(cctx.Err(), context.DeadlineExceeded)
	dec := json.NewDecoder(&stdout)
	for {
		var ev testEvent
		if err := dec.Decode(&ev); err != nil {
			if err != io.EOF {
				// Not JSON (an old go command's build output): keep it.
				rest, _ := io.ReadAll(dec.Buffered())
				tr.stderr += string(rest) + stdout.String()
			}
			break
		}
		tr.events = append(tr.events, ev)
	}
	return tr
}

// testEnv is the process's environment for go test, without a GOWORK
// that names a file outside the copy (the copy's own go.work is found by
// the go command).
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GOWORK=") && kv != "GOWORK=off" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

var timedOut = regexp.MustCompile(`panic: test timed out after`)

// classify sets res's status from what go test did.
func classify(res *Result, tr testRun, timeout time.Duration) {
	var (
		output    strings.Builder // every output line, for the tail
		failed    []string        // failed tests
		ran       int             // tests started
		buildFail bool
		pkgFail   bool
	)
	for _, ev := range tr.events {
		if ev.Output != "" {
			output.WriteString(ev.Output)
		}
		switch ev.Action {
		case "run":
			if ev.Test != "" {
				ran++
			}
		case "fail":
			if ev.Test != "" {
				failed = append(failed, shortPkg(ev.Package, tr.module)+"."+ev.Test)
			} else {
				pkgFail = true
			}
			if ev.FailedBuild != "" {
				buildFail = true
			}
		case "build-fail":
			buildFail = true
		}
	}
	all := output.String() + tr.stderr
	if strings.Contains(all, "[build failed]") || strings.Contains(all, "[setup failed]") {
		buildFail = true
	}
	res.Output = tail(all, 40)
	switch {
	case tr.deadline:
		res.Status, res.Reason = Hung, fmt.Sprintf("go test did not finish in %s (the tests' timeout %s and the build allowance); stopped", tr.duration.Round(time.Second), timeout)
	case timedOut.MatchString(all):
		res.Status, res.Reason = Hung, "a test hung past the timeout of "+timeout.String()+" instead of failing"
	case buildFail:
		res.Status, res.Reason = Invalid, "the mutated tree does not compile"
	case tr.exitErr == nil && ran == 0:
		res.Status, res.Reason = Invalid, "no test ran: the packages have no test matching the run pattern"
	case tr.exitErr == nil:
		res.Status, res.Reason = Survived, fmt.Sprintf("%d tests ran and passed", ran)
	case len(failed) > 0 || pkgFail:
		res.Status, res.Killers = Killed, leaves(failed)
		res.Reason = "by " + summarize(res.Killers)
		if len(failed) == 0 {
			res.Reason = "the test binary failed (" + firstPanic(all) + ")"
		}
	default:
		res.Status, res.Reason = Invalid, "go test failed before running tests: "+firstLine(tr.stderr)
	}
}

// leaves keeps the most specific failed tests: a parent test fails when a
// subtest does, and naming both says nothing more.
func leaves(failed []string) []string {
	sort.Strings(failed)
	var out []string
	for i, f := range failed {
		if i+1 < len(failed) && strings.HasPrefix(failed[i+1], f+"/") {
			continue
		}
		out = append(out, f)
	}
	return out
}

func summarize(tests []string) string {
	if len(tests) <= 3 {
		return strings.Join(tests, ", ")
	}
	return strings.Join(tests[:3], ", ") + fmt.Sprintf(" and %d more", len(tests)-3)
}

// shortPkg names a package for a report: by its path inside the root's
// module (the root package by the module's last element), or whole.
func shortPkg(p, module string) string {
	switch {
	case p == "":
		return "."
	case module != "" && p == module:
		return module[strings.LastIndex(module, "/")+1:]
	case module != "" && strings.HasPrefix(p, module+"/"):
		return p[len(module)+1:]
	}
	return p
}

func firstPanic(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "panic: ") {
			return strings.TrimSpace(l)
		}
	}
	return "no test reported failing"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// baseline runs the mutations' tests on the unmutated copy: each distinct
// set of packages once per shape of run pattern, the patterns joined: a
// pattern of one level with the others of one level, a pattern of
// subtests with those whose levels but the last are the same, their last
// levels joined.
func baseline(ctx context.Context, cfg Config, scratch string, muts []Mutation) error {
	type group struct {
		pkgs    []string
		env     []string
		prefix  []string // the levels before the joined one
		lasts   []string // the joined level's alternatives
		timeout time.Duration
		all     bool // a mutation runs every test of the packages
	}
	var order []string
	groups := map[string]*group{}
	for _, m := range muts {
		levels := splitRun(m.Run)
		prefix, last := levels[:len(levels)-1], levels[len(levels)-1]
		key := strings.Join(m.Packages, " ") + "\x00" + strings.Join(m.Env, " ") + "\x00" + strings.Join(prefix, "/")
		g := groups[key]
		if g == nil {
			g = &group{pkgs: m.Packages, env: m.Env, prefix: prefix}
			groups[key] = g
			order = append(order, key)
		}
		if m.Run == "" {
			g.all = true
		} else if !containsString(g.lasts, last) {
			g.lasts = append(g.lasts, last)
		}
		t := m.Timeout
		if t <= 0 {
			t = cfg.Timeout
		}
		g.timeout = max(g.timeout, t)
	}
	for i, key := range order {
		g := groups[key]
		run := ""
		if !g.all {
			last := g.lasts[0]
			if len(g.lasts) > 1 {
				parts := make([]string, len(g.lasts))
				for j, r := range g.lasts {
					parts[j] = "(?:" + r + ")"
				}
				last = strings.Join(parts, "|")
			}
			run = strings.Join(append(append([]string(nil), g.prefix...), last), "/")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(cfg.Progress, "baseline [%d/%d] %s -run '%s' ... ", i+1, len(order), strings.Join(g.pkgs, " "), run)
		tr := goTest(ctx, cfg, scratch, g.pkgs, run, g.timeout, g.env)
		var r Result
		classify(&r, tr, g.timeout)
		fmt.Fprintf(cfg.Progress, "%s\n", map[Status]string{Survived: "pass", Killed: "FAIL", Hung: "HUNG", Invalid: "INVALID"}[r.Status])
		if r.Status != Survived {
			return fmt.Errorf("%w: go test -run '%s' %s: %s%s\n%s", ErrBaseline, run, strings.Join(g.pkgs, " "), r.Status, reasonSuffix(r), indent(r.Output, "    | "))
		}
	}
	return nil
}

// splitRun splits a -run pattern into its levels at the slashes outside
// brackets and parentheses, as the testing package does.
func splitRun(run string) []string {
	var levels []string
	depth, start := 0, 0
	for i := 0; i < len(run); i++ {
		switch run[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '\\':
			i++
		case '/':
			if depth == 0 {
				levels = append(levels, run[start:i])
				start = i + 1
			}
		}
	}
	return append(levels, run[start:])
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
