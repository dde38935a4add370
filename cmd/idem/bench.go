package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/bench"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// cmdBench measures the engine against the raw driver of the same store.
func cmdBench(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("bench",
		"idem bench --store DSN [--concurrency 1,16,64] [--duration 5s] [--payload 200B] [--scenarios LIST] [--prefill 10k,1M] [--sweep-under-load 1M [--sweep-rate N]] [--waiters N] [--hold DUR] [--json]",
		"Measures idem's engine against the raw driver doing the minimal statements of\n"+
			"an idempotent request (claim, record, read) on the same store, in the same run,\n"+
			"and prints ops/s, p50/p99 latency and the ratio idem/raw per scenario.\n"+
			"It works on scratch tables (or a scratch SQLite file, or a scratch Redis prefix)\n"+
			"and drops them when it ends. Store options written in the DSN's query are\n"+
			"passed to the store and shown in the header. Scenarios: first, replay, storm,\n"+
			"mixed (the default set), waiters (a storm of --waiters callers on one key, run\n"+
			"twice: parked by Engine.DoAsync, then as goroutines in DoBytes; store calls and\n"+
			"peak memory), or all. With --prefill, both sides are loaded with terminal\n"+
			"records up to each size in turn (COPY, multi-row INSERTs, pipelines) and the\n"+
			"scenarios (default first,replay at c=16) run at each size: a growth curve.\n"+
			"The end of the report gives each side's bytes per record and, on PostgreSQL,\n"+
			"the share of its updates that were HOT. --sweep-under-load N loads N expired\n"+
			"records and measures first-time requests (c=16) before, while and after a\n"+
			"sweeper deletes them (--sweep-rate caps it, records/s). See docs/performance.md.",
		"idem bench --store sqlite://bench.db --duration 2s")
	store := f.String("store", "", "store DSN to measure: "+storeDSNs+" (required)")
	conc := f.String("concurrency", "1,16,64", "comma-separated numbers of concurrent callers")
	dur := f.duration("duration", 5*time.Second, "how long each cell is measured")
	payload := f.String("payload", "200B", "size of the recorded result (e.g. 200B, 4KiB)")
	scenarios := f.String("scenarios", strings.Join(bench.DefaultScenarios, ","), "comma-separated scenarios, or all")
	waiters := f.Int("waiters", 10000, "callers parked on one key in the waiters scenario")
	hold := f.duration("hold", time.Second, "how long the waiters scenario holds its key")
	prefill := f.String("prefill", "", "comma-separated table sizes to load both sides to before measuring, e.g. 10k,1M")
	sweepLoad := f.String("sweep-under-load", "", "load this many expired records (e.g. 1M) and measure first-time requests while they are swept")
	sweepRate := f.Float64("sweep-rate", 0, "with --sweep-under-load: the sweeper's cap, records a second (0: none)")
	asJSON := f.Bool("json", false, "print the report as JSON")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	opt := bench.Options{Store: *store, Duration: *dur, Waiters: *waiters, Hold: *hold, Progress: e.stderr, ProgressPlain: !isTerminal(e.stderr)}
	var err error
	if opt.Concurrency, err = bench.ParseConcurrency(*conc); err != nil {
		return f.usageError("--concurrency: %v", err)
	}
	if opt.Payload, err = bench.ParseSize(*payload); err != nil {
		return f.usageError("--payload: %v", err)
	}
	if opt.Scenarios, err = bench.ParseScenarios(*scenarios); err != nil {
		return f.usageError("--scenarios: %v", err)
	}
	if *prefill != "" {
		if opt.Prefill, err = bench.ParsePrefill(*prefill); err != nil {
			return f.usageError("--prefill: %v", err)
		}
		set := map[string]bool{}
		f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if !set["scenarios"] {
			opt.Scenarios = []string{bench.ScenarioFirst, bench.ScenarioReplay}
		}
		if !set["concurrency"] {
			opt.Concurrency = []int{16}
		}
	}
	if *sweepLoad != "" {
		ns, err := bench.ParsePrefill(*sweepLoad)
		if err != nil || len(ns) != 1 {
			return f.usageError("--sweep-under-load: want one count such as 1M")
		}
		opt.SweepUnderLoad = ns[0]
	}
	if *sweepRate < 0 || *sweepRate != *sweepRate {
		return f.usageError("--sweep-rate must be 0 or more records a second")
	}
	opt.SweepRate = *sweepRate
	switch {
	case *store == "":
		return f.usageError("--store is required")
	case *dur < 10*time.Millisecond:
		return f.usageError("--duration %s is below 10ms", *dur)
	case *waiters < 1 || *waiters > 1_000_000:
		return f.usageError("--waiters %d is not between 1 and 1000000", *waiters)
	}
	if _, err := storeopen.Parse(*store); err != nil {
		return f.usageError("--store: %v", err)
	}
	rep, err := bench.Run(ctx, opt)
	if rep != nil {
		// Print what was measured, also when some cells failed.
		write := bench.WriteText
		if *asJSON {
			write = bench.WriteJSON
		}
		if werr := write(e.stdout, rep); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted; scratch data dropped")
		}
		return f.fail(err)
	}
	return exitOK
}

// isTerminal reports whether w is a terminal (a character device), where
// progress may rewrite its line in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
