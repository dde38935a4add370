package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/testenv/counts"
)

// Scenario names.
const (
	ScenarioFirst   = "first"   // every request is a new key: claim + record
	ScenarioReplay  = "replay"  // every request repeats a recorded key
	ScenarioStorm   = "storm"   // many callers on few keys at once
	ScenarioMixed   = "mixed"   // 90% replays, 10% first-time requests
	ScenarioWaiters = "waiters" // many InFlightWait callers parked on one key
)

// DefaultScenarios are run when Options.Scenarios is empty. The waiters
// scenario is not among them: it measures memory, not throughput.
var DefaultScenarios = []string{ScenarioFirst, ScenarioReplay, ScenarioStorm, ScenarioMixed}

var allScenarios = []string{ScenarioFirst, ScenarioReplay, ScenarioStorm, ScenarioMixed, ScenarioWaiters}

// Options configures [Run].
type Options struct {
	// Store is the DSN of the store to measure, as accepted by the CLI's
	// --store. The bench opens it on a scratch table or key prefix of its
	// own. There is no default.
	Store string
	// Concurrency lists the numbers of concurrent callers; each scenario
	// runs once per entry. Defaults to 1, 16, 64.
	Concurrency []int
	// Duration is how long each cell is measured (after a warm-up of a
	// tenth of it). Defaults to 5s.
	Duration time.Duration
	// Payload is the size in bytes of the result each request records.
	// Defaults to 200.
	Payload int
	// Scenarios selects what to run, in order. Defaults to DefaultScenarios.
	Scenarios []string
	// Waiters is how many callers the waiters scenario parks on one key.
	// Defaults to 10000.
	Waiters int
	// Hold is how long the waiters scenario holds the key before recording
	// its outcome. Defaults to 1s.
	Hold time.Duration
	// Prefill, when set, lists table sizes in ascending order: before the
	// scenarios run at each, both sides are loaded with terminal records
	// up to that many (a growth curve). Replays then read prefilled
	// records spread over the whole table. Defaults to none.
	Prefill []int64
	// SweepUnderLoad, when positive, replaces the scenarios: that many
	// expired records are loaded into idem's side and swept by an
	// idem.Sweeper while 16 callers make first-time requests, with the
	// same requests measured before and after. Defaults to 0, off.
	SweepUnderLoad int64
	// SweepRate is the sweeper's MaxRate (records a second) in the
	// SweepUnderLoad run; 0 is no cap.
	SweepRate float64
	// Progress, when not nil, receives a progress line while cells run.
	// Defaults to none.
	Progress io.Writer
	// ProgressPlain makes Progress plain lines, one per finished cell,
	// for output that is not a terminal (carriage returns would litter a
	// log). Defaults to false: one line rewritten in place.
	ProgressPlain bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Store == "" {
		return o, errors.New("bench: Options.Store: empty; name a store DSN")
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 16, 64}
	}
	for _, c := range o.Concurrency {
		if c < 1 || c > 4096 {
			return o, fmt.Errorf("bench: Options.Concurrency: %d is not between 1 and 4096", c)
		}
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Duration < 10*time.Millisecond {
		return o, fmt.Errorf("bench: Options.Duration: %s is below 10ms", o.Duration)
	}
	if o.Payload == 0 {
		o.Payload = 200
	}
	if o.Payload < 0 || o.Payload > 16<<20 {
		return o, fmt.Errorf("bench: Options.Payload: %d bytes is not between 1 and 16MiB", o.Payload)
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(allScenarios, s) {
			return o, fmt.Errorf("bench: Options.Scenarios: unknown scenario %q (want %s)", s, strings.Join(allScenarios, ", "))
		}
	}
	if o.Waiters == 0 {
		o.Waiters = 10000
	}
	if o.Waiters < 1 || o.Waiters > 1_000_000 {
		return o, fmt.Errorf("bench: Options.Waiters: %d is not between 1 and 1000000", o.Waiters)
	}
	for i, n := range o.Prefill {
		if n < 1 || (i > 0 && n <= o.Prefill[i-1]) {
			return o, fmt.Errorf("bench: Options.Prefill: %v is not a list of ascending positive sizes", o.Prefill)
		}
	}
	if o.Hold == 0 {
		o.Hold = time.Second
	}
	if o.Hold < 0 {
		return o, fmt.Errorf("bench: Options.Hold: %s is negative", o.Hold)
	}
	return o, nil
}

// ParseConcurrency parses a list such as "1,16,64".
func ParseConcurrency(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("concurrency %q is not a number between 1 and 4096", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty concurrency list")
	}
	return out, nil
}

// ParseSize parses a byte size: "200", "200B", "4KiB", "4KB" (1000), "1MiB".
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(t))
	if err != nil || n < 1 || n > (16<<20)/mult {
		return 0, fmt.Errorf("size %q is not between 1B and 16MiB (write e.g. 200B or 4KiB)", s)
	}
	return n * mult, nil
}

// ParseScenarios parses a comma-separated scenario list.
func ParseScenarios(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.ToLower(p))
		if p == "" {
			continue
		}
		if p == "all" {
			return slices.Clone(allScenarios), nil
		}
		if !slices.Contains(allScenarios, p) {
			return nil, fmt.Errorf("unknown scenario %q (want %s or all)", p, strings.Join(allScenarios, ", "))
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("empty scenario list")
	}
	return out, nil
}

// ParsePrefill parses a list of record counts such as "10k,1M,10M"
// (k = 1,000, M = 1,000,000), ascending, none of them 0.
func ParsePrefill(s string) ([]int64, error) {
	out, err := counts.ParseList(s)
	if err == nil && out[0] == 0 {
		return nil, errors.New("size 0 is not a positive count (write e.g. 10k or 1M)")
	}
	return out, err
}
