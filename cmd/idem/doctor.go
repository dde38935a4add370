package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// schemaChecker is implemented by the SQL stores: the schema version
// applied and what is wrong with the schema (table, unique constraint on
// (scope, key), migrations).
type schemaChecker interface {
	CheckSchema(ctx context.Context) (version int, findings []idem.Finding, err error)
}

// doctorCheckTimeout bounds each of doctor's questions to the store.
const doctorCheckTimeout = 10 * time.Second

func cmdDoctor(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("doctor", "idem doctor [--store DSN] [--ttl DUR] [--cover NAME=DUR]... [--lease DUR] [--json]",
		"Check a store as the proxy and the engine would run on it, and print every finding\n"+
			"with its fix: the schema (version, unique constraint on (scope, key)), durability\n"+
			"settings (eviction, persistence, fsync), replication (whether a failover can lose a\n"+
			"claim the store acknowledged: asynchronous standbys and replicas), clock skew between\n"+
			"this host and the store, the oldest unknown record, and the retention (--ttl) against\n"+
			"the windows it must cover (--cover). Exit 0 when healthy, 3 on findings, 1 when a\n"+
			"check cannot run.",
		"idem doctor --store redis://127.0.0.1:6379/0 --ttl 24h --cover dlq-replay=72h")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	ttl := f.duration("ttl", 24*time.Hour, "the TTL the proxy or engine runs with")
	lease := f.duration("lease", 30*time.Second, "the lease the proxy or engine runs with (clock skew is judged against a quarter of it)")
	cover := coverFlag{}
	f.Var(cover, "cover", "a window the TTL must cover, NAME=DUR (repeatable)")
	asJSON := f.Bool("json", false, "print the report as one JSON object (every check, every finding)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if *ttl <= 0 || *lease <= 0 {
		return f.usageError("--ttl and --lease must be positive")
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	d := &doctor{st: st, ttl: *ttl, lease: *lease, cover: cover}
	if p, err := storeopen.Parse(*dsn); err == nil && p.Scheme == "sqlite" {
		d.local = true
	}
	d.run(ctx)
	if *asJSON {
		if err := d.writeJSON(e.stdout, redacted(*dsn)); err != nil {
			return f.fail(err)
		}
	} else {
		d.writeText(e.stdout, redacted(*dsn))
	}
	switch {
	case d.failed > 0:
		return exitFailure
	case d.findings > 0:
		return exitFindings
	}
	return exitOK
}

// doctor runs the checks and keeps their results for the report.
type doctor struct {
	st       idem.Store
	ttl      time.Duration
	lease    time.Duration
	cover    coverFlag
	results  []checkResult
	findings int  // findings in all
	failed   int  // checks that could not run
	noTable  bool // the schema check found no records table
	topology string
	local    bool // the store is a file on this host (sqlite://)
}

// checkResult is one check's outcome: what was fine, its findings, or why
// it could not run.
type checkResult struct {
	Name     string        `json:"name"`
	OK       string        `json:"ok,omitempty"`
	Error    string        `json:"error,omitempty"`
	Findings []findingJSON `json:"findings"`
}

// findingJSON is an idem.Finding as doctor --json prints it.
type findingJSON struct {
	Severity string `json:"severity"`
	Setting  string `json:"setting"`
	Value    string `json:"value"`
	Problem  string `json:"problem"`
	Fix      string `json:"fix"`
}

func (d *doctor) run(ctx context.Context) {
	for _, c := range []struct {
		name string
		run  func(ctx context.Context) (ok string, fs []idem.Finding, err error)
	}{
		{"schema", d.schema},
		{"durability", d.durability},
		{"replication", d.replication},
		{"clock", d.clock},
		{"unknown", d.unknown},
		{"retention", d.retention},
	} {
		cctx, cancel := context.WithTimeout(ctx, doctorCheckTimeout)
		ok, fs, err := c.run(cctx)
		cancel()
		r := checkResult{Name: c.name, Findings: []findingJSON{}}
		switch {
		case err != nil:
			d.failed++
			r.Error = err.Error()
		case len(fs) == 0:
			r.OK = ok
		}
		for _, f := range fs {
			d.findings++
			r.Findings = append(r.Findings, findingJSON{Severity: f.Severity.String(), Setting: f.Setting, Value: f.Value, Problem: f.Problem, Fix: f.Fix})
		}
		d.results = append(d.results, r)
	}
}

// writeText prints one block per check: its error, its findings, or what
// was fine; then the verdict.
func (d *doctor) writeText(w io.Writer, store string) {
	fmt.Fprintf(w, "idem doctor: %s\n", store)
	for _, r := range d.results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%-8s %-11s %s\n", "ERROR", r.Name, r.Error)
		case len(r.Findings) == 0:
			fmt.Fprintf(w, "%-8s %-11s %s\n", "ok", r.Name, r.OK)
		}
		if r.Name == "replication" && len(r.Findings) > 0 && d.topology != "" {
			fmt.Fprintf(w, "%-8s %-11s %s\n", "", r.Name, d.topology)
		}
		for _, f := range r.Findings {
			fmt.Fprintf(w, "%-8s %-11s %s = %s\n", strings.ToUpper(f.Severity), r.Name, f.Setting, f.Value)
			fmt.Fprintf(w, "%-20s problem: %s\n", "", f.Problem)
			fmt.Fprintf(w, "%-20s fix:     %s\n", "", f.Fix)
		}
	}
	switch {
	case d.failed > 0:
		fmt.Fprintf(w, "%d check(s) could not run.\n", d.failed)
	case d.findings > 0:
		fmt.Fprintf(w, "%d finding(s).\n", d.findings)
	default:
		fmt.Fprintln(w, "healthy.")
	}
}

// doctorJSON is the report doctor --json prints.
type doctorJSON struct {
	Store string `json:"store"`
	// Verdict is "healthy", "findings" or "failed" (a check could not run).
	Verdict     string        `json:"verdict"`
	Findings    int           `json:"findings"`
	Failed      int           `json:"failed"`
	Replication string        `json:"replication_topology,omitempty"`
	Checks      []checkResult `json:"checks"`
}

func (d *doctor) writeJSON(w io.Writer, store string) error {
	out := doctorJSON{Store: store, Verdict: "healthy", Findings: d.findings, Failed: d.failed, Replication: d.topology, Checks: d.results}
	switch {
	case d.failed > 0:
		out.Verdict = "failed"
	case d.findings > 0:
		out.Verdict = "findings"
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func (d *doctor) schema(ctx context.Context) (string, []idem.Finding, error) {
	sc, ok := d.st.(schemaChecker)
	if !ok {
		return "no SQL schema (claims are decided by the store's atomic primitive)", nil, nil
	}
	v, fs, err := sc.CheckSchema(ctx)
	for _, f := range fs {
		d.noTable = d.noTable || (strings.HasPrefix(f.Setting, "table ") && f.Value == "absent")
	}
	return fmt.Sprintf("version %d; unique constraint on (scope, key) present", v), fs, err
}

func (d *doctor) durability(ctx context.Context) (string, []idem.Finding, error) {
	dc, ok := d.st.(idem.DurabilityChecker)
	if !ok {
		return "the store has no settings idem can read (the memory store forgets everything on exit)", nil, nil
	}
	fs, err := dc.CheckDurability(ctx)
	return "keeps what it acknowledged (no eviction, persistence and syncing on)", fs, err
}

// replication asks the store whether a failover can lose a claim it
// acknowledged. A refusing finding is named "asynchronous replication",
// as the engine's refusal is.
func (d *doctor) replication(ctx context.Context) (string, []idem.Finding, error) {
	rc, ok := d.st.(idem.ReplicationChecker)
	if !ok {
		return "the store is not replicated (nothing to fail over)", nil, nil
	}
	rep, err := rc.CheckReplication(ctx)
	if err != nil {
		return "", nil, err
	}
	d.topology = rep.Topology
	fs := make([]idem.Finding, len(rep.Findings))
	for i, f := range rep.Findings {
		if f.Severity == idem.SeverityRefuse && !strings.Contains(f.Problem, "asynchronous replication") {
			f.Problem = "asynchronous replication: " + f.Problem
		}
		fs[i] = f
	}
	return rep.Topology + ": a failover cannot lose an acknowledged claim", fs, nil
}

func (d *doctor) clock(ctx context.Context) (string, []idem.Finding, error) {
	sc, ok := d.st.(idem.StoreClock)
	if !ok && d.local {
		return "the store is local: it shares this host's clock", nil, nil
	}
	if !ok {
		// DynamoDB and NATS key-value have no clock a client can read:
		// leases and expiry are decided on the callers' clocks.
		return "the store has no clock idem can read: leases and expiry follow the callers' clocks (keep them synchronised)", nil, nil
	}
	off, rtt, err := idem.MeasureClockOffset(ctx, sc, time.Now)
	if err != nil {
		return "", nil, err
	}
	summary := fmt.Sprintf("the store's clock is %s from this host's (round trip %s)", signed(off), rtt.Round(time.Microsecond))
	if off.Abs() <= d.lease/4 {
		return summary, nil, nil
	}
	return "", []idem.Finding{{
		Setting: "clock skew", Value: signed(off),
		Problem: fmt.Sprintf("this host's clock is off the store's by more than a quarter of the lease (%s); engines decide leases and expiry on the store's clock, "+
			"but anything reading this host's clock alone (logs, a sweeper given a Clock) disagrees", d.lease),
		Fix:      "synchronise this host's and the store's clocks (chrony or systemd-timesyncd against the same NTP servers)",
		Severity: idem.SeverityWarning,
	}}, nil
}

func (d *doctor) unknown(ctx context.Context) (string, []idem.Finding, error) {
	if d.noTable {
		return "not checked: there is no records table", nil, nil
	}
	recs, err := d.st.List(ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown}, Limit: 1})
	if err != nil || len(recs) == 0 {
		return "no unknown record", nil, err
	}
	now := time.Now()
	if sc, ok := d.st.(idem.StoreClock); ok {
		if t, err := sc.StoreTime(ctx); err == nil {
			now = t
		}
	}
	r := recs[0]
	return "", []idem.Finding{{
		Setting: "unknown records", Value: "oldest " + now.Sub(r.CreatedAt).Round(time.Second).String() + " old",
		Problem: fmt.Sprintf("outcomes idem could not decide wait for an operator or a reconciler (oldest: scope %q, key %q); "+
			"a retry of one gets 409 until it is decided", r.Scope, r.Key),
		Fix:      "idem list --state unknown --store DSN, find each effect's outcome, then idem resolve (or run idem reconcile)",
		Severity: idem.SeverityWarning,
	}}, nil
}

func (d *doctor) retention(context.Context) (string, []idem.Finding, error) {
	err := idem.ValidateRetention(d.ttl, d.cover)
	var re *idem.RetentionError
	if errors.As(err, &re) {
		return "", []idem.Finding{{
			Setting: "--ttl", Value: d.ttl.String(),
			Problem:  err.Error(),
			Fix:      fmt.Sprintf("raise --ttl to at least %s, the %q window", re.Need, re.Window),
			Severity: idem.SeverityRefuse,
		}}, nil
	}
	if err != nil {
		return "", nil, err
	}
	if len(d.cover) == 0 {
		return fmt.Sprintf("--ttl %s; no --cover window named (name the longest client retry chain or replay window to check it)", d.ttl), nil, nil
	}
	return fmt.Sprintf("--ttl %s covers every --cover window", d.ttl), nil, nil
}

// signed renders d with its sign, rounded to the microsecond.
func signed(d time.Duration) string {
	d = d.Round(time.Microsecond)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
