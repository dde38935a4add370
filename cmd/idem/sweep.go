package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// sweepProgressAfter is how long a sweep runs before it prints progress
// lines on stderr.
var sweepProgressAfter = 2 * time.Second

func cmdSweep(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("sweep", "idem sweep [--store DSN] [--rate ROWS/s] [--json]",
		"Delete succeeded and failed records whose retention has passed. In-progress\nand unknown records are never deleted. Records go in batches of 1000; --rate\ncaps how many a second, so a large backlog is cleared beside live traffic.",
		"idem sweep --store postgres://idem@db:5432/app")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	rate := f.Float64("rate", 0, "at most this many records deleted a second (0: no cap)")
	asJSON := f.Bool("json", false, `print the result as one JSON object, {"deleted": N} (see docs/cli.md)`)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0) {
		return f.usageError("--rate must be a number of records a second, 0 or more")
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	start, last := time.Now(), time.Time{}
	n, err := idem.NewSweeper(st, idem.SweeperConfig{MaxRate: *rate, OnBatch: func(sofar int) {
		if now := time.Now(); now.Sub(start) >= sweepProgressAfter && now.Sub(last) >= sweepProgressAfter/2 {
			last = now
			fmt.Fprintf(e.stderr, "idem sweep: %d records deleted (%s)\n", sofar, now.Sub(start).Round(time.Millisecond))
		}
	}}).RunOnce(ctx)
	if err != nil {
		return f.fail(fmt.Errorf("after deleting %d records: %w", n, err))
	}
	if *asJSON {
		return writeJSON(f, e.stdout, map[string]int{"deleted": n})
	}
	fmt.Fprintf(e.stdout, "deleted %d expired records\n", n)
	return exitOK
}
