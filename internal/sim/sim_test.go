package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	seedFlag     = flag.Uint64("seed", 0, "simulation: run this seed (TestSimReplay; the first seed of TestSimLong)")
	durationFlag = flag.Duration("duration", 0, "simulation: TestSimLong runs seeds from -seed on for this long")
	intentsFlag  = flag.String("intents", "all", "simulation: TestSimReplay keeps only these intents (comma-separated ids)")
	faultsFlag   = flag.String("faults", "all", "simulation: TestSimReplay keeps only these planned faults and jobs (comma-separated ids)")
	controlFlag  = flag.String("control", "none", "simulation: TestSimReplay and TestSimLong disable this guard (no-unique-claim, no-fence, no-fingerprint, global-scope)")
)

// seedSet returns the fixed seed set: seeds 1..n with n = 150 worlds
// (over 1,000,000 requests), 6 under the race detector (which slows the
// simulation about tenfold; .ci/run runs the full set without it) or
// under -short, or IDEM_SIM_WORLDS.
func seedSet(t *testing.T) []Config {
	n := fullWorlds
	if raceEnabled {
		n = raceWorlds
	}
	if s := os.Getenv("IDEM_SIM_WORLDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("IDEM_SIM_WORLDS=%q: want a positive number of worlds", s)
		}
		n = v
	} else if testing.Short() {
		n = raceWorlds
	}
	var cs []Config
	for i := range n {
		cs = append(cs, Default(uint64(i+1)))
	}
	return cs
}

// The seed set's sizes.
const (
	fullWorlds = 150
	raceWorlds = 6
)

func parallelism() int {
	if n, err := strconv.Atoi(os.Getenv("IDEM_SIM_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 8 * runtime.GOMAXPROCS(0)
}

// failWorlds reports failing worlds, each shrunk to the smallest replay
// that still fails.
func failWorlds(t *testing.T, tot Totals) {
	t.Helper()
	for i, r := range tot.Failed {
		if i == 3 {
			t.Errorf("… and %d more failing worlds", len(tot.Failed)-i)
			break
		}
		t.Errorf("world failed:\n%s", Report(r))
		if s := Shrink(r); s != r {
			t.Errorf("shrunk to:\n%s", Report(s))
		}
	}
}

// TestSimSeeds runs the fixed seed set on memstore and checks every
// history: at most one effect per (scope, key), exactly one when a caller
// saw success, replays identical to the first answer, no answer across
// scopes or for another request, no unknown without a fault.
func TestSimSeeds(t *testing.T) {
	start := time.Now()
	tot := RunSeeds(seedSet(t), parallelism(), nil)
	t.Logf("%d worlds (histories) checked: %d requests, %d intents, %d effects, %d answered unknown; %d violations; %s",
		tot.Worlds, tot.Requests, tot.Intents, tot.Effects, tot.Unknowns, tot.Violations, time.Since(start).Round(time.Millisecond))
	f := tot.Faults
	t.Logf("faults: %d lost answers, %d resets, %d refused, %d answers lost to store restarts, %d store restarts, %d kills (%d at crash points), %d provider timeouts, %d effects outliving their lease; %d operator resolutions, %d sweeps deleting %d records",
		f.lost, f.reset, f.refused, f.restartLost, f.storeRestarts, f.kills, f.crashPoints, f.providerTimeouts, f.slowEffects, f.resolutions, f.sweeps, f.swept)
	t.Logf("calls cut off by kills: %s", (&Result{Faults: f}).KillPhases())
	if missing := f.Coverage(); len(missing) > 0 {
		t.Errorf("the seed set never exercised: %v", missing)
	}
	failWorlds(t, tot)
	if len(seedSet(t)) == fullWorlds && tot.Requests < 1_000_000 {
		t.Errorf("the seed set simulated %d requests, want at least 1,000,000", tot.Requests)
	}
}

// TestSimDeterministic: one seed, one history. The same world run twice
// gives the same history, entry for entry.
func TestSimDeterministic(t *testing.T) {
	for _, seed := range []uint64{7, 8} {
		cfg := Default(seed)
		cfg.Intents = 400
		a, b := Run(cfg), Run(cfg)
		if a.Err != nil || b.Err != nil {
			t.Fatal(a.Err, b.Err)
		}
		if len(a.History) != len(b.History) {
			t.Fatalf("seed %d: %d then %d history entries", seed, len(a.History), len(b.History))
		}
		for i := range a.History {
			if a.History[i] != b.History[i] {
				t.Fatalf("seed %d: histories differ at entry %d:\n  %s\n  %s", seed, i, a.History[i], b.History[i])
			}
		}
		if a.Summary() != b.Summary() {
			t.Fatalf("seed %d: %s\nthen %s", seed, a.Summary(), b.Summary())
		}
	}
}

// TestSimControls disables one guard at a time and asserts the checker
// catches the violations it lets through, by the rule that guard backs.
func TestSimControls(t *testing.T) {
	for _, tc := range []struct {
		c     Control
		rules []string // at least one violation of one of these
	}{
		{ControlNoUniqueClaim, []string{RuleAtMostOnce}},
		{ControlNoFence, []string{RuleReplaySame, RuleRecordAgrees}},
		{ControlNoFingerprint, []string{RuleOwnRequest}},
		{ControlGlobalScope, []string{RuleOwnRequest}},
	} {
		t.Run(tc.c.String(), func(t *testing.T) {
			t.Parallel()
			seeds := uint64(8)
			if raceEnabled || testing.Short() {
				seeds = 3
			}
			var cs []Config
			for seed := uint64(1); seed <= seeds; seed++ {
				c := Default(seed)
				c.Control = tc.c
				cs = append(cs, c)
			}
			rules := map[string]int{}
			tot := RunSeeds(cs, parallelism(), func(r *Result) {
				for _, v := range r.Violations {
					rules[v.Rule]++
				}
			})
			want := 0
			for _, r := range tc.rules {
				want += rules[r]
			}
			t.Logf("control %s: %d worlds, %d requests, %d violations detected %v", tc.c, tot.Worlds, tot.Requests, tot.Violations, rules)
			if want == 0 {
				t.Errorf("control %s: the checker found no %v violation in %d worlds (found %v)", tc.c, tc.rules, tot.Worlds, rules)
			}
			if len(tot.Failed) > 0 {
				t.Logf("a failing world of the control, as a failure prints it:\n%s", Report(Shrink(tot.Failed[0])))
			}
		})
	}
}

// TestSimReplay runs one world, as a failing seed's report says:
// -seed N [-control C] [-intents ids] [-faults ids], and prints its
// history.
func TestSimReplay(t *testing.T) {
	if *seedFlag == 0 || *durationFlag > 0 {
		t.Skip("give -seed N (and the -intents/-faults/-control a failure printed), without -duration, to replay a world")
	}
	cfg := Default(*seedFlag)
	c, err := ParseControl(*controlFlag)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control = c
	if *intentsFlag != "all" || *faultsFlag != "all" {
		cfg.Keep = &Keep{}
		if *intentsFlag != "all" {
			if cfg.Keep.Intents, err = ParseIDs(*intentsFlag); err != nil {
				t.Fatal(err)
			}
		}
		if *faultsFlag != "all" {
			if cfg.Keep.Faults, err = ParseIDs(*faultsFlag); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := Run(cfg)
	var b strings.Builder
	for _, o := range r.History {
		fmt.Fprintf(&b, "  %s\n", o)
	}
	t.Logf("history:\n%s", b.String())
	t.Log(r.Summary())
	if r.Failed() {
		t.Errorf("%s", Report(r))
	}
}

// TestSimLong runs seeds from -seed (default 1) on for -duration of wall
// time: go test ./internal/sim -run TestSimLong -seed 1000 -duration 10m
// -timeout 0.
func TestSimLong(t *testing.T) {
	if *durationFlag <= 0 {
		t.Skip("give -duration D (and -timeout 0 past 10m) for a long run")
	}
	c, err := ParseControl(*controlFlag)
	if err != nil {
		t.Fatal(err)
	}
	seed := max(*seedFlag, 1)
	deadline := time.Now().Add(*durationFlag)
	if dl, ok := t.Deadline(); ok && dl.Add(-2*time.Minute).Before(deadline) {
		// go test's -timeout (10m by default) ends first: stop short of
		// it (a batch of worlds takes a while to end) rather than be
		// killed with nothing reported.
		deadline = dl.Add(-2 * time.Minute)
		t.Logf("-timeout ends the run at %s; give -timeout 0 for the full -duration", deadline.Format(time.TimeOnly))
	}
	var all Totals
	for time.Now().Before(deadline) {
		var cs []Config
		for range parallelism() {
			cfg := Default(seed)
			cfg.Control = c
			cs = append(cs, cfg)
			seed++
		}
		tot := RunSeeds(cs, parallelism(), nil)
		all.Worlds += tot.Worlds
		all.Requests += tot.Requests
		all.Violations += tot.Violations
		all.Failed = append(all.Failed, tot.Failed...)
		if len(all.Failed) > 0 {
			break
		}
	}
	t.Logf("seeds %d..%d: %d worlds, %d requests, %d violations", max(*seedFlag, 1), seed-1, all.Worlds, all.Requests, all.Violations)
	failWorlds(t, all)
}
