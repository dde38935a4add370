// Command mutate runs a guard-mutation gate (package
// github.com/idemkit/idem/idemtest/mutation): each mutation of the lists
// is applied in turn to a scratch copy of the tree, the tests it names are
// run, and the gate fails unless every mutation is killed.
//
// Usage:
//
//	mutate [flags] [list files or directories...]
//
// Lists default to testdata/mutations (every *.txt in it). From idem's
// repository root: `go run ./idemtest/mutation/cmd/mutate` (or
// scripts/mutate). For your own module: `go run
// github.com/idemkit/idem/idemtest/mutation/cmd/mutate mutations.txt`.
//
// Flags:
//
//	-root DIR        the tree to copy and mutate (default ".")
//	-shard I/N       run only shard I of N (0 <= I < N): the mutations whose
//	                 id hashes to I mod N
//	-rotate N        run shard (commit count of HEAD mod N) of N, so that
//	                 N consecutive CI runs cover every mutation
//	-match REGEXP    run only the mutations whose id matches
//	-item LIST       run only these checklist items (comma-separated)
//	-timeout D       each mutation's test timeout, unless it sets one (5m)
//	-testflags F     flags added to every go test (e.g. "-race")
//	-no-baseline     skip the run of the tests on the unmutated copy
//	-check           only check that every edit applies exactly once; run
//	                 no test
//	-list            print the selected mutations and exit
//	-markdown        print the kill rate per checklist item as a Markdown
//	                 table at the end
//	-scratch DIR     copy the tree there (default: a temporary directory)
//	-keep            keep the scratch copy
//	-v               keep and print the output of killed mutations too
//
// Exit status: 0 every mutation killed; 3 a mutation survived, hung, was
// invalid or was not run; 1 the run could not be made (the copy, or the
// tests fail without any mutation); 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem/idemtest/mutation"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitFound   = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		root       = fs.String("root", ".", "the tree to copy and mutate")
		shard      = fs.String("shard", "", "run only shard I/N")
		rotate     = fs.Int("rotate", 0, "run shard (commit count of HEAD mod N) of N")
		match      = fs.String("match", "", "run only the mutations whose id matches this regexp")
		items      = fs.String("item", "", "run only these checklist items (comma-separated)")
		timeout    = fs.Duration("timeout", 5*time.Minute, "each mutation's test timeout, unless it sets one")
		testflags  = fs.String("testflags", "", "flags added to every go test")
		noBaseline = fs.Bool("no-baseline", false, "skip the run of the tests on the unmutated copy")
		check      = fs.Bool("check", false, "only check that every edit applies exactly once")
		list       = fs.Bool("list", false, "print the selected mutations and exit")
		markdown   = fs.Bool("markdown", false, "print the kill rate per checklist item as a Markdown table")
		scratch    = fs.String("scratch", "", "copy the tree there")
		keep       = fs.Bool("keep", false, "keep the scratch copy")
		verbose    = fs.Bool("v", false, "keep and print the output of killed mutations too")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mutate [flags] [list files or directories...]   (default testdata/mutations)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mutate: "+format+"\n", a...)
		return exitUsage
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{*root + "/testdata/mutations"}
	}
	muts, err := mutation.Load(paths...)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitFailure
	}
	total := len(muts)
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return usage("-match: %v", err)
		}
		muts = filter(muts, func(m mutation.Mutation) bool { return re.MatchString(m.ID) })
	}
	if *items != "" {
		want := map[string]bool{}
		for _, it := range strings.Split(*items, ",") {
			want[strings.TrimSpace(it)] = true
		}
		muts = filter(muts, func(m mutation.Mutation) bool { return want[m.Item] })
	}
	if *shard != "" && *rotate != 0 {
		return usage("-shard and -rotate are exclusive")
	}
	var i, n int
	switch {
	case *shard != "":
		if i, n, err = parseShard(*shard); err != nil {
			return usage("-shard: %v", err)
		}
	case *rotate < 0:
		return usage("-rotate: want a positive number of runs")
	case *rotate > 0:
		count, err := commitCount(ctx, *root)
		if err != nil {
			fmt.Fprintf(stderr, "mutate: -rotate: %v\n", err)
			return exitFailure
		}
		i, n = count%*rotate, *rotate
	}
	if n > 1 {
		muts = mutation.Shard(muts, i, n)
		fmt.Fprintf(stdout, "mutate: shard %d/%d: %d of %d mutations\n", i, n, len(muts), total)
	}
	if *list {
		for _, m := range muts {
			fmt.Fprintf(stdout, "%-44s %-14s %s\n", m.ID, m.Item, m.Source)
		}
		return exitOK
	}
	if *check {
		bad := mutation.Check(*root, muts)
		for _, r := range bad {
			fmt.Fprintf(stdout, "invalid %s (%s): %s\n", r.Mutation.ID, r.Mutation.Source, r.Reason)
		}
		fmt.Fprintf(stdout, "mutate: %d mutations checked, %d invalid\n", len(muts), len(bad))
		if len(bad) > 0 {
			return exitFound
		}
		return exitOK
	}
	if len(muts) == 0 {
		fmt.Fprintln(stdout, "mutate: no mutation selected")
		return exitOK
	}
	cfg := mutation.Config{
		Root: *root, Scratch: *scratch, Keep: *keep, Timeout: *timeout,
		TestFlags: strings.Fields(*testflags), Baseline: !*noBaseline,
		KeepOutput: *verbose, Progress: stdout,
	}
	rep, err := mutation.Run(ctx, cfg, muts)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return exitFailure
	}
	if *verbose {
		for _, r := range rep.Results {
			if r.Status == mutation.Killed && r.Output != "" {
				fmt.Fprintf(stdout, "\n%s killed %s:\n%s\n", r.Mutation.ID, r.Reason, r.Output)
			}
		}
	}
	rep.WriteSummary(stdout)
	if *markdown {
		fmt.Fprintln(stdout)
		rep.WriteMarkdown(stdout)
	}
	if rep.Failed() {
		return exitFound
	}
	return exitOK
}

func filter(muts []mutation.Mutation, keep func(mutation.Mutation) bool) []mutation.Mutation {
	var out []mutation.Mutation
	for _, m := range muts {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
	}
	if ok && err == nil {
		n, err = strconv.Atoi(b)
	}
	if !ok || err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("want I/N with 0 <= I < N, got %q", s)
	}
	return i, n, nil
}

// commitCount is the number of commits reachable from HEAD in the
// repository at dir: a number that grows by one with each commit, the
// same on every clone.
func commitCount(ctx context.Context, dir string) (int, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-list", "--count", "HEAD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("git rev-list --count HEAD: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}
