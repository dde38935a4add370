package sim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Totals sums the results of many worlds.
type Totals struct {
	Worlds, Requests, Intents, Effects, Unknowns, Violations int
	Failed                                                   []*Result
	// Faults sums the worlds' faults.
	Faults faultCounts
}

func (t *Totals) add(r *Result) {
	t.Worlds++
	t.Requests += r.Requests
	t.Intents += r.Intents
	t.Effects += r.Effects
	t.Unknowns += r.Unknowns
	t.Violations += len(r.Violations)
	t.Faults.add(r.Faults)
	if r.Failed() {
		t.Failed = append(t.Failed, r)
	}
}

// RunSeeds runs the worlds of configs, parallel worlds at a time (each
// world is deterministic on its own; running several at once only hides
// the wall-clock waits of the engine's retry backoff), and returns their
// totals; failed worlds are in seed order.
func RunSeeds(configs []Config, parallel int, each func(*Result)) Totals {
	var (
		mu  sync.Mutex
		tot Totals
		wg  sync.WaitGroup
	)
	next := make(chan Config)
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				r := Run(c)
				mu.Lock()
				tot.add(r)
				if each != nil {
					each(r)
				}
				mu.Unlock()
			}
		}()
	}
	for _, c := range configs {
		next <- c
	}
	close(next)
	wg.Wait()
	sort.Slice(tot.Failed, func(i, j int) bool { return tot.Failed[i].Config.Seed < tot.Failed[j].Config.Seed })
	return tot
}

func (f *faultCounts) add(g faultCounts) {
	f.reset += g.reset
	f.lost += g.lost
	f.refused += g.refused
	f.restartLost += g.restartLost
	f.kills += g.kills
	f.restarts += g.restarts
	f.storeRestarts += g.storeRestarts
	f.providerTimeouts += g.providerTimeouts
	f.slowEffects += g.slowEffects
	f.resolutions += g.resolutions
	f.sweeps += g.sweeps
	f.swept += g.swept
	f.unfenced += g.unfenced
	f.crashPoints += g.crashPoints
	if f.killPhase == nil {
		f.killPhase = map[string]int{}
	}
	for k, v := range g.killPhase {
		f.killPhase[k] += v
	}
}

// Coverage returns the faults of a run that never happened, by name: a
// seed set that misses one shows nothing about it.
func (f *faultCounts) Coverage() []string {
	var missing []string
	for _, c := range []struct {
		name string
		n    int
	}{
		{"lost answers", f.lost}, {"resets", f.reset}, {"refused connections", f.refused},
		{"answers lost to a store restart", f.restartLost}, {"store restarts", f.storeRestarts},
		{"provider timeouts (late truths)", f.providerTimeouts}, {"effects outliving their lease", f.slowEffects},
		{"operator resolutions", f.resolutions}, {"records swept", f.swept}, {"process restarts", f.restarts},
		{"kills " + PhaseAfterClaim, f.killPhase[PhaseAfterClaim]},
		{"kills " + PhaseDuringEffect, f.killPhase[PhaseDuringEffect]},
		{"kills " + PhaseAfterEffect, f.killPhase[PhaseAfterEffect]},
		{"kills " + PhaseAfterRecord, f.killPhase[PhaseAfterRecord]},
	} {
		if c.n == 0 {
			missing = append(missing, c.name)
		}
	}
	return missing
}

// offending returns the intents a result's violations name, with every
// intent that shares a key with one of them (they share a record under
// some controls), or nil when a violation is about the whole world.
func offending(r *Result) map[int]bool {
	ids := map[int]bool{}
	for _, v := range r.Violations {
		if v.Intent < 0 {
			return nil
		}
		ids[v.Intent] = true
	}
	keys := map[string]bool{}
	for _, ip := range r.Plan.intents {
		if ids[ip.id] {
			keys[ip.key] = true
		}
	}
	for _, ip := range r.Plan.intents {
		if keys[ip.key] {
			ids[ip.id] = true
		}
	}
	return ids
}

// Shrink looks for a smaller world that still fails: first only the
// offending intents (and those sharing their keys), then as few planned
// faults and jobs as will keep it failing, dropping one at a time. It
// returns the smallest failing configuration found and its result (the
// input itself when nothing smaller fails).
func Shrink(r *Result) *Result {
	if !r.Failed() || r.Err != nil {
		return r
	}
	ids := offending(r)
	if len(ids) == 0 {
		return r
	}
	cfg := r.Config
	// One offending intent alone (with those sharing its key) first, then
	// all of them together.
	var best *Result
	for _, v := range r.Violations {
		one := offending(&Result{Plan: r.Plan, Violations: []Violation{v}})
		cfg.Keep = &Keep{Intents: one}
		if res := Run(cfg); res.Failed() {
			best, ids = res, one
			break
		}
	}
	if best == nil {
		cfg.Keep = &Keep{Intents: ids}
		if best = Run(cfg); !best.Failed() {
			return r // it needs the other intents' interleaving: the full seed replays it
		}
	}
	all := map[int]bool{}
	for _, f := range best.Plan.faults {
		all[f.id] = true
	}
	try := func(faults map[int]bool) bool {
		c := best.Config
		c.Keep = &Keep{Intents: ids, Faults: faults}
		if res := Run(c); res.Failed() {
			best = res
			return true
		}
		return false
	}
	if try(map[int]bool{}) {
		return best
	}
	keep := maps.Clone(all)
	for _, id := range slices.Sorted(maps.Keys(all)) {
		delete(keep, id)
		if !try(maps.Clone(keep)) {
			keep[id] = true
		}
	}
	return best
}

// Report renders a failing world for a test log: its seed, the command
// that replays it, its violations and the history of the intents they
// name (with the world's faults).
func Report(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.Summary())
	if r.Err != nil {
		fmt.Fprintf(&b, "error: %v\n", r.Err)
	}
	fmt.Fprintf(&b, "replay: go test ./internal/sim -run 'TestSimReplay$' -v -seed %d", r.Config.Seed)
	if r.Config.Control != ControlNone {
		fmt.Fprintf(&b, " -control %s", r.Config.Control)
	}
	if k := r.Config.Keep; k != nil {
		if k.Intents != nil {
			fmt.Fprintf(&b, " -intents %s", joinIDs(k.Intents))
		}
		if k.Faults != nil {
			fmt.Fprintf(&b, " -faults %s", joinIDs(k.Faults))
		}
	}
	b.WriteString("\n")
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "… %d more violations\n", len(r.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "violation: %s\n", v)
	}
	ids := offending(r)
	if ids == nil {
		ids = map[int]bool{}
	}
	ops := r.IntentHistory(ids)
	const maxOps = 400
	if len(ops) > maxOps {
		fmt.Fprintf(&b, "history: last %d of %d entries\n", maxOps, len(ops))
		ops = ops[len(ops)-maxOps:]
	} else {
		fmt.Fprintf(&b, "history (%d entries):\n", len(ops))
	}
	for _, o := range ops {
		fmt.Fprintf(&b, "  %s\n", o)
	}
	return b.String()
}

func joinIDs(m map[int]bool) string {
	if len(m) == 0 {
		return `""`
	}
	var s []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		s = append(s, strconv.Itoa(id))
	}
	return strings.Join(s, ",")
}

// ParseIDs parses a -intents or -faults list ("3,17"; "" is the empty
// set).
func ParseIDs(s string) (map[int]bool, error) {
	m := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" || f == `""` {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("sim: bad id %q in %q", f, s)
		}
		m[n] = true
	}
	return m, nil
}

// ParseControl parses a control's name (as Control.String prints it).
func ParseControl(s string) (Control, error) {
	for c := ControlNone; c <= ControlGlobalScope; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("sim: unknown control %q", s)
}
