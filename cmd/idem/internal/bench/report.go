package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// scenarioTitles say what each scenario measures and what the raw side does.
var scenarioTitles = map[string]string{
	ScenarioFirst:  "first-time requests — idem: claim + record; raw: INSERT + UPDATE (SET NX + HSET)",
	ScenarioReplay: "replays — idem: claim finds the record; raw: SELECT by key (HGETALL)",
	ScenarioStorm: fmt.Sprintf("duplicate storm, %d requests per key — idem: InFlightReject; raw: INSERT-if-absent, then UPDATE or SELECT",
		stormDup),
	ScenarioMixed: "mixed — 90% replays, 10% first-time",
}

// WriteText writes rep as a header and one table per scenario.
func WriteText(w io.Writer, rep *Report) error {
	h := rep.Header
	var b strings.Builder
	fmt.Fprintf(&b, "idem bench  %s  %s (%s/%s, %d CPUs, %s)\n", h.Date.Format(time.RFC3339), h.Host, h.OS, h.Arch, h.CPUs, h.GoVersion)
	fmt.Fprintf(&b, "load average   %s at start, %s at end\n", orDash(h.LoadStart), orDash(h.LoadEnd))
	fmt.Fprintf(&b, "store          %s\n", h.Store)
	fmt.Fprintf(&b, "store options  %s\n", orDash(h.StoreOptions))
	if h.GroupCommit != "" {
		fmt.Fprintf(&b, "group commit   %s\n", h.GroupCommit)
	}
	if h.Connections > 0 {
		fmt.Fprintf(&b, "connections    at most %d a side (pool_max_conns in the DSN)\n", h.Connections)
	}
	fmt.Fprintf(&b, "durability     %s\n", orDash(h.Durability))
	if h.DurabilityNote != "" {
		fmt.Fprintf(&b, "               not durable: %s\n", h.DurabilityNote)
	}
	switch {
	case h.SweepUnderLoad > 0:
		fmt.Fprintf(&b, "cells          phases of at least %s (slices of %s) at c=%d; payload %d B\n", h.Duration, sliceLen, sweepLoadCallers, h.Payload)
	case len(h.Prefill) > 0:
		ns := make([]string, len(h.Prefill))
		for i, n := range h.Prefill {
			ns[i] = count(n)
		}
		fmt.Fprintf(&b, "cells          %s each after a %s warm-up; payload %d B; prefilled to %s terminal records a side, replays spread over them; concurrency %s\n",
			h.Duration, h.Duration/10, h.Payload, strings.Join(ns, ", "), joinInts(h.Concurrency))
	default:
		fmt.Fprintf(&b, "cells          %s each after a %s warm-up; payload %d B; replays cycle %d keys; concurrency %s\n",
			h.Duration, h.Duration/10, h.Payload, replayKeys, joinInts(h.Concurrency))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, sc := range scenariosIn(rep.Cells) {
		if err := writeScenario(w, sc, rep.Cells); err != nil {
			return err
		}
	}
	for _, r := range rep.Waiters {
		if err := writeWaiters(w, r); err != nil {
			return err
		}
	}
	if err := writeGrowth(w, rep.Cells); err != nil {
		return err
	}
	if err := writeSweepLoad(w, rep.SweepLoad); err != nil {
		return err
	}
	return writeFootprints(w, rep.Footprints)
}

// writeGrowth writes, for prefilled runs, each side's throughput and p99 at
// every table size beside the same at the smallest size.
func writeGrowth(w io.Writer, cells []Cell) error {
	type at struct {
		sc, side string
		c        int
	}
	first := map[at]Cell{}
	var rows []Cell
	for _, c := range cells {
		if c.Prefill == 0 || c.Error != "" || c.Side == sideIdemCache {
			continue
		}
		k := at{c.Scenario, c.Side, c.Concurrency}
		if _, ok := first[k]; !ok {
			first[k] = c
		}
		rows = append(rows, c)
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ngrowth — each cell against the same cell at the smallest table\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tc\tside\trecords\tops/s\tp99\tops/s vs smallest\tp99 vs smallest\t")
	for _, c := range rows {
		f := first[at{c.Scenario, c.Side, c.Concurrency}]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t\n", c.Scenario, c.Concurrency, c.Side, count(c.Prefill),
			rate(c.OpsPerSec), msString(c.P99), c.OpsPerSec/f.OpsPerSec, c.P99/f.P99)
	}
	return tw.Flush()
}

// count formats a record count: 10k, 1M, 2.5M, 999.
func count(n int64) string {
	switch {
	case n >= 1e6 && n%1e5 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	case n >= 1e3 && n%100 == 0:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

func writeFootprints(w io.Writer, fs []Footprint) error {
	if len(fs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nfootprint at the end of the run (%s)\n", fs[0].How)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hot := fs[0].Updates > 0 || fs[len(fs)-1].Updates > 0
	if hot {
		fmt.Fprintln(tw, "side\trecords\tbytes\tB/record\tidem/raw\tupdates\tHOT\tHOT %\t")
	} else {
		fmt.Fprintln(tw, "side\trecords\tbytes\tB/record\tidem/raw\t")
	}
	var raw float64
	for _, f := range fs {
		ratio := ""
		if f.Side == sideRaw {
			raw = f.BytesPerRecord
		} else if raw > 0 {
			ratio = fmt.Sprintf("%.2f", f.BytesPerRecord/raw)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t", f.Side, f.Records, f.Bytes, f.BytesPerRecord, ratio)
		if hot {
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t", f.Updates, f.HOTUpdates, 100*f.HOTRatio())
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func writeScenario(w io.Writer, sc string, cells []Cell) error {
	fmt.Fprintf(w, "\n%s\n", scenarioTitles[sc])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	prefilled := false
	for _, c := range cells {
		prefilled = prefilled || c.Prefill > 0
	}
	if prefilled {
		fmt.Fprint(tw, "records\t")
	}
	fmt.Fprintln(tw, "c\tside\tops/s\tp50\tp99\tidem/raw\tfirst\treplays\tconflicts\tstmts/req\tsrv CPU/req\tWAL/req\t")
	for _, c := range cells {
		if c.Scenario != sc {
			continue
		}
		if prefilled {
			fmt.Fprintf(tw, "%s\t", count(c.Prefill))
		}
		if c.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\tfailed\t\t\t\t\t\t\t\t\t\t\n", c.Concurrency, c.Side)
			continue
		}
		ratio := ""
		if c.Side != sideRaw {
			ratio = fmt.Sprintf("%.2f", c.Ratio)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t\n", c.Concurrency, c.Side, rate(c.OpsPerSec),
			msString(c.P50), msString(c.P99), ratio, c.First, c.Replays, c.Conflicts,
			orNA(c.StmtsPerReq, "%.2f"), orNA(c.ServerCPUPerReq, "%.0fµs"), orNA(c.WALPerReq, "%.0f B"))
	}
	return tw.Flush()
}

func writeWaiters(w io.Writer, r *WaiterResult) error {
	peak := "peak RSS"
	if !r.PeakExact {
		peak = "peak RSS (whole process; could not reset)"
	}
	_, err := fmt.Fprintf(w, `
waiters (%s) — %d InFlightWait callers on one key, held %s
  replayed            %d of %d
  store calls         %d claims to join; %d watch reads while held; %d claims + %d reads after the release
  wake-up             %s from the release until the last waiter returned
  memory              RSS %.1f MiB before, %s %.1f MiB; Go stacks %.1f MiB (%.1f MiB after a GC), heap %.1f MiB, %d goroutines while parked
`, r.Mode, r.Waiters, r.Hold, r.Replayed, r.Waiters, r.JoinClaims, r.WatchReads, r.WakeClaims, r.WakeReads,
		r.WakeDuration.Round(time.Millisecond), mib(r.RSSBeforeKiB), peak, mib(r.PeakRSSKiB), mib(r.StackKiB), mib(r.StackAfterGCKiB), mib(r.HeapKiB), r.Goroutines)
	return err
}

// WriteJSON writes rep as one indented JSON document.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func scenariosIn(cells []Cell) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cells {
		if !seen[c.Scenario] {
			seen[c.Scenario] = true
			out = append(out, c.Scenario)
		}
	}
	return out
}

// rate formats ops/s with three significant digits: 812, 6.61k, 88.2k.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e5:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func msString(ms float64) string {
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 1:
		return fmt.Sprintf("%.1fms", ms)
	}
	return fmt.Sprintf("%.0fµs", ms*1000)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// orNA formats *v, or "n/a" when it was not measured.
func orNA(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
