package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// Report is the result of [Run].
type Report struct {
	Header  Header          `json:"header"`
	Cells   []Cell          `json:"cells"`
	Waiters []*WaiterResult `json:"waiters,omitempty"`
	// Footprints are what each side's table held at the end (bytes per
	// record; PostgreSQL: HOT updates over the run); none for the memory
	// store.
	Footprints []Footprint `json:"footprints,omitempty"`
	// SweepLoad is the sweep-under-load run (Options.SweepUnderLoad).
	SweepLoad *SweepLoadResult `json:"sweep_under_load,omitempty"`
}

// Header describes the run: when, where, against what.
type Header struct {
	Date      time.Time `json:"date"`
	Host      string    `json:"host"`
	OS        string    `json:"os"`
	Arch      string    `json:"arch"`
	CPUs      int       `json:"cpus"`
	GoVersion string    `json:"go_version"`
	// LoadStart and LoadEnd are the 1/5/15-minute load averages when the
	// run started and ended: a shared machine makes numbers noisy.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// Store is the DSN as given, password redacted.
	Store string `json:"store"`
	// StoreOptions are the DSN's query parameters (e.g. a group-commit
	// window), which both the store and this report see.
	StoreOptions string `json:"store_options"`
	// GroupCommit is the group commit the opened idem store runs, defaults
	// included ("eager, outcomes batched", "off"); empty for a store
	// without group commit.
	GroupCommit string `json:"group_commit,omitempty"`
	// Connections is the most connections each side's pool opens
	// (PostgreSQL: pool_max_conns, pgxpool's default max(4, CPUs) when the
	// DSN leaves it out); 0 when the store has no pool of its own.
	Connections int `json:"connections,omitempty"`
	// Durability is the server's durability setting, read from it.
	Durability string `json:"durability"`
	// DurabilityNote, when the server's settings let an acknowledged claim
	// be lost in a crash, says what could be lost; empty when durable.
	DurabilityNote string        `json:"durability_note,omitempty"`
	Duration       time.Duration `json:"duration_ns"`
	Payload        int           `json:"payload_bytes"`
	Concurrency    []int         `json:"concurrency"`
	Prefill        []int64       `json:"prefill,omitempty"`
	SweepUnderLoad int64         `json:"sweep_under_load,omitempty"`
}

// Cell is one measurement: a scenario, a side and a concurrency.
type Cell struct {
	Scenario    string  `json:"scenario"`
	Side        string  `json:"side"`
	Concurrency int     `json:"concurrency"`
	Ops         int64   `json:"ops"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	// First, Replays and Conflicts count how requests ended (raw: an
	// insert that won, a read, —).
	First     int64 `json:"first"`
	Replays   int64 `json:"replays"`
	Conflicts int64 `json:"conflicts"`
	// Ratio is this side's ops/s over the raw side's in the same scenario
	// and concurrency; 0 for the raw side itself.
	Ratio float64 `json:"ratio,omitempty"`
	// StmtsPerReq, ServerCPUPerReq (µs) and WALPerReq (bytes) are what
	// the side cost the server per request, read around each of its
	// slices (see meter.go); absent where the store or the server's
	// placement does not let them be measured. On Redis, statements are
	// commands and the CPU is the whole server's.
	StmtsPerReq     *float64 `json:"stmts_per_req,omitempty"`
	ServerCPUPerReq *float64 `json:"server_cpu_us_per_req,omitempty"`
	WALPerReq       *float64 `json:"wal_bytes_per_req,omitempty"`
	// Error, when not empty, is why the cell failed; its figures are zero.
	Error string `json:"error,omitempty"`
	// Prefill is how many prefilled records each side held (--prefill).
	Prefill int64 `json:"prefill,omitempty"`
}

// Run measures opt.Store. The store must be reachable; everything the run
// creates is dropped before Run returns, even when it fails. When some cells
// fail (a store error under load), Run returns the report with those cells
// marked and an error naming them.
func Run(ctx context.Context, opt Options) (rep *Report, err error) {
	if opt, err = opt.withDefaults(); err != nil {
		return nil, err
	}
	d, err := storeopen.Parse(opt.Store)
	if err != nil {
		return nil, err
	}
	rep = &Report{Header: newHeader(d, opt)}
	t, err := openTarget(ctx, opt.Store)
	if err != nil {
		return nil, err
	}
	rep.Header.Durability = t.durability
	rep.Header.DurabilityNote = t.durabilityNote
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, t.raw.close(), t.cleanup(cctx))
	}()
	sopt := storeopen.Options{Migrate: true}
	if t.pgTracer != nil {
		sopt.PGTracer = t.pgTracer
	}
	st, err := storeopen.Open(ctx, t.idemDSN, sopt)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rep.Header.GroupCommit = groupCommitOf(st)
	rep.Header.Connections = connectionsOf(st)
	var closeOnce sync.Once
	closeStore := func() (err error) {
		closeOnce.Do(func() { err = st.Close() })
		return err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	var before []Footprint
	if opt.SweepUnderLoad > 0 {
		t.footprint = nil // the sweep empties idem's side and the raw side stays empty
	}
	if t.footprint != nil {
		if before, err = t.footprint(ctx); err != nil {
			return nil, fmt.Errorf("bench: measuring the tables: %w", err)
		}
	}
	w, err := newWorkload(st, t.raw, opt.Payload)
	if err != nil {
		return nil, err
	}
	w.meter = t.meter
	defer w.eng.Close()
	defer w.cacheEng.Close()
	pr := newProgress(opt)
	var cellErrs []error
	switch {
	case opt.SweepUnderLoad > 0:
		if rep.SweepLoad, err = runSweepUnderLoad(ctx, w, t, st, opt, pr); err != nil {
			return nil, err
		}
	case len(opt.Prefill) > 0:
		if err := runPrefilled(ctx, rep, w, t, st, opt, pr, &cellErrs); err != nil {
			return nil, err
		}
	}
	for _, sc := range opt.Scenarios {
		if len(opt.Prefill) > 0 || opt.SweepUnderLoad > 0 {
			break
		}
		if sc == ScenarioWaiters {
			// Async first: its peak RSS is not inflated by the memory
			// the goroutine run leaves to the runtime.
			for _, mode := range []string{WaitersAsync, WaitersGoroutines} {
				pr.line("waiters: %d %s callers on one key, held %s", opt.Waiters, mode, opt.Hold)
				r, werr := runWaiters(ctx, st, mode, opt.Waiters, opt.Hold, w.payload)
				if werr != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					// Keep what was measured so far.
					cellErrs = append(cellErrs, fmt.Errorf("bench: waiters (%s): %w", mode, werr))
					continue
				}
				rep.Waiters = append(rep.Waiters, r)
			}
			continue
		}
		if err := runScenario(ctx, rep, w, sc, opt, pr, &cellErrs); err != nil {
			return nil, err
		}
	}
	pr.done()
	rep.Header.LoadEnd = loadAvg()
	if t.footprint != nil {
		// idem's store first reports its counters as it closes.
		if err := closeStore(); err != nil {
			return rep, errors.Join(append(cellErrs, err)...)
		}
		after, err := t.footprint(ctx)
		if err != nil {
			cellErrs = append(cellErrs, fmt.Errorf("bench: measuring the tables: %w", err))
		} else {
			rep.Footprints = footprintDelta(before, after)
		}
	}
	return rep, errors.Join(cellErrs...)
}

func newHeader(d storeopen.DSN, opt Options) Header {
	host, _ := os.Hostname()
	return Header{Date: time.Now().UTC().Truncate(time.Second), Host: host, OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg(), Store: d.Redacted(),
		StoreOptions: storeOptions(d.Raw), Duration: opt.Duration, Payload: opt.Payload, Concurrency: opt.Concurrency,
		Prefill: opt.Prefill, SweepUnderLoad: opt.SweepUnderLoad}
}

func newWorkload(st idem.Store, raw rawStore, payload int) (*workload, error) {
	// Scratch records: the bench measures a store whatever its durability
	// and replication (the header says which), unreplicated claims on a
	// replicated server included, as a baseline for replicated ones.
	eng, err := idem.New(st, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}, AllowVolatileStore: true, AllowAsyncReplication: true})
	if err != nil {
		return nil, err
	}
	cacheEng, err := idem.New(st, idem.Config{AllowVolatileStore: true, AllowAsyncReplication: true}) // the default replay cache
	if err != nil {
		return nil, err
	}
	return &workload{raw: raw, eng: eng, cacheEng: cacheEng, payload: bytes.Repeat([]byte("x"), payload)}, nil
}

// sliceLen is how long one side runs before the next takes over.
const sliceLen = 500 * time.Millisecond

// runScenario runs one scenario's cells. At each concurrency the sides
// (raw, idem, ...) each warm up for a tenth of opt.Duration, then take
// turns in slices of about sliceLen until each has run opt.Duration, the
// side going first rotating every round: drift on a shared machine over
// the seconds of a cell (a checkpoint, a neighbour's burst) falls on every
// side alike instead of on whichever ran at the time.
func runScenario(ctx context.Context, rep *Report, w *workload, sc string, opt Options, pr *progress, cellErrs *[]error) error {
	if (sc == ScenarioReplay || sc == ScenarioMixed) && w.prefilled == 0 {
		pr.line("recording %d keys for replays", replayKeys)
		if err := w.prepare(ctx); err != nil {
			return fmt.Errorf("bench: recording replay keys: %w", err)
		}
	}
	rounds := max(1, int(opt.Duration/sliceLen))
	slice := opt.Duration / time.Duration(rounds)
	for _, c := range opt.Concurrency {
		sides := sidesOf(sc)
		ops := make([]op, len(sides))
		seqs := make([]atomic.Int64, len(sides))
		acc := make([]*cellResult, len(sides))
		errs := make([]error, len(sides))
		for i, side := range sides {
			ops[i] = w.opFor(sc, side, fmt.Sprintf("%s%d-%s-", sc, len(rep.Cells)+i, side))
			acc[i] = &cellResult{}
		}
		for r := -1; r < rounds; r++ {
			for j := range sides {
				i := (j + max(r, 0)) % len(sides)
				if errs[i] != nil {
					continue
				}
				d := slice
				if r < 0 {
					d = opt.Duration / 10 // warm-up, not counted
					pr.start(sc, sides[i], c)
				} else {
					pr.line("%-7s c=%-4d round %d/%d: %s", sc, c, r+1, rounds, sides[i])
				}
				var u0 usage
				metered := r >= 0 && w.meter != nil
				if metered {
					var merr error
					if u0, merr = w.meter.sample(ctx, sides[i]); merr != nil {
						metered = false
						acc[i].use = unmeasured
					}
				}
				res, err := runFor(ctx, c, d, &seqs[i], ops[i])
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					errs[i] = err
					continue
				}
				if metered {
					if u1, merr := w.meter.sample(ctx, sides[i]); merr == nil {
						res.use, res.metered = u1.sub(u0), true
					} else {
						acc[i].use = unmeasured
					}
				}
				if r >= 0 {
					acc[i].add(res)
				}
			}
		}
		var rawRate float64
		for i, side := range sides {
			if err := errs[i]; err != nil {
				// Keep what was measured; the report shows the failed cell.
				err = fmt.Errorf("bench: %s %s c=%d: %w", sc, side, c, err)
				rep.Cells = append(rep.Cells, Cell{Scenario: sc, Side: side, Concurrency: c, Error: err.Error()})
				*cellErrs = append(*cellErrs, err)
				continue
			}
			cell := toCell(sc, side, c, acc[i])
			cell.Prefill = w.prefilled
			if side == sideRaw {
				rawRate = cell.OpsPerSec
			} else if rawRate > 0 {
				cell.Ratio = cell.OpsPerSec / rawRate
			}
			pr.finish(cell)
			rep.Cells = append(rep.Cells, cell)
		}
	}
	return nil
}

func toCell(sc, side string, c int, r *cellResult) Cell {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return Cell{Scenario: sc, Side: side, Concurrency: c, Ops: r.ops,
		OpsPerSec: float64(r.ops) / r.elapsed.Seconds(),
		P50:       ms(r.hist.quantile(0.50)), P99: ms(r.hist.quantile(0.99)),
		First: r.outcomes[outFirst], Replays: r.outcomes[outReplay], Conflicts: r.outcomes[outConflict],
		StmtsPerReq: perRequest(r.use.stmts, r.usedOps), ServerCPUPerReq: perRequest(r.use.cpu, r.usedOps),
		WALPerReq: perRequest(r.use.wal, r.usedOps)}
}

// runPrefilled loads both sides up to each size of opt.Prefill in turn and
// runs the scenarios there.
func runPrefilled(ctx context.Context, rep *Report, w *workload, t *target, st idem.Store, opt Options, pr *progress, cellErrs *[]error) error {
	if t.prefill == nil {
		return fmt.Errorf("bench: --prefill: no loader for %s", t.scheme)
	}
	var loaded int64
	for _, n := range opt.Prefill {
		start := time.Now()
		last := time.Time{}
		err := t.prefill(ctx, st, prefillSpec{}, loaded, n, w.payload, func(side string, done int64) {
			if time.Since(last) >= time.Second || done == n-loaded {
				last = time.Now()
				pr.line("prefill %s: %d/%d records (%.0f/s)", side, loaded+done, n, float64(done)/time.Since(start).Seconds())
			}
		})
		if err != nil {
			return fmt.Errorf("bench: prefill to %d: %w", n, err)
		}
		pr.line("prefilled %d records a side in %s", n, time.Since(start).Round(time.Millisecond))
		loaded, w.prefilled = n, n
		for _, sc := range opt.Scenarios {
			if sc == ScenarioWaiters {
				continue
			}
			if err := runScenario(ctx, rep, w, sc, opt, pr, cellErrs); err != nil {
				return err
			}
		}
	}
	return nil
}
