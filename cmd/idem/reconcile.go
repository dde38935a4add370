package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
	"github.com/idemkit/idem/reconcile/httpprovider"
	moneyfmt "github.com/idemkit/idem/reconcile/money"
)

const reconcileAbout = `Compare the store's records with the provider's view, by forwarded key:
  provider applied, local none/unknown  → recorded (under_counted)
  local succeeded, provider none after the settlement window → flagged (over_counted)
  both agree                            → marked reconciled; later runs skip it
  amount or currency differs            → flagged (drift)
  local unknown, provider never applied → failed (or --not-applied) after the window

A settlement file is read in idem's own layout (csv: integer minor units,
RFC 3339 times) or a provider's: stripe-balance (the Dashboard's balance
export, key in "idempotency_key (metadata)", or the itemized balance change
and payout reconciliation reports, key in "payment_metadata[idempotency_key]")
or adyen-settlement (the Settlement details report, key in "Merchant
Reference"). --map, --status-map, --type-filter and --amount-unit adjust a
layout to any other file. Refunds are matched to the refund key of the same
order. Rows that settle no intent (fees, payouts, adjustments) and rows not
compared (a key idem did not make, older than the look-back) are listed by
reason with their lines; "result: clean" only when none of those could hide
a duplicate. A key the provider lists twice is a finding of its own.

Prints a table (or --json) on stdout, and with --report a human report
(HTML, or CSV by the file's extension). On long runs, progress lines go to
stderr; resolutions are logged on stderr.

Exit status: 0 clean; 3 drift, over-counted or duplicated keys found (they
take precedence); 1 the run failed, some keys could not be decided, or
provider rows that may settle an intent were not compared; 2 usage.`

// reconcileProgressAfter is how long a reconciliation runs before it
// prints progress lines on stderr.
var reconcileProgressAfter = 2 * time.Second

// reconcileOpts are idem reconcile's flags.
type reconcileOpts struct {
	dsn, csv, url, listURL, scope, orphanScope, notApplied string
	window, ttl, lookback                                  *time.Duration
	batch                                                  int
	json                                                   bool
	headers                                                providerHeaders
	format, statusMap, typeFilter, amountUnit, refundKey   string
	report                                                 string
	maps, exponents                                        listFlag
	typeFilterSet                                          bool
	keyFile                                                *string
}

// cmdReconcile compares the store's records with a provider's view:
// `idem reconcile --store DSN (--provider-csv FILE | --provider-url TEMPLATE)`.
// Exit 0 when clean, 3 when drift or over-counts were found.
func cmdReconcile(ctx context.Context, e *env, args []string) int {
	f, o := reconcileFlags(e)
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if msg := o.check(); msg != "" {
		return f.usageError("%s", msg)
	}
	keys, code, ok := f.loadKeys(*o.keyFile)
	if !ok {
		return code
	}
	prov, err := o.provider()
	if err != nil {
		return f.fail(err)
	}
	st, code, ok := openExisting(ctx, f, o.dsn)
	if !ok {
		return code
	}
	defer st.Close()
	return o.run(ctx, f, st, keys, prov)
}

// reconcileFlags registers idem reconcile's flags.
func reconcileFlags(e *env) (*flags, *reconcileOpts) {
	f := e.newFlags("reconcile",
		"idem reconcile [--store DSN] (--provider-csv FILE [--provider-format csv|stripe-balance|adyen-settlement] | --provider-url TEMPLATE) [--settlement-window DUR] [--json] [--report FILE.html|FILE.csv] [--encryption-key-file FILE]",
		reconcileAbout,
		"idem reconcile --store postgres://idem@db/payments --provider-csv balance_transactions.csv --provider-format stripe-balance --settlement-window 48h --report reconcile.html")
	o := &reconcileOpts{}
	f.StringVar(&o.dsn, "store", storeopen.Default, "store DSN: "+storeDSNs)
	f.StringVar(&o.csv, "provider-csv", "", "settlement file: CSV with header key,amount,currency,status,applied_at[,scope]")
	f.StringVar(&o.url, "provider-url", "", "lookup URL template with {key}, answering JSON (404 = not applied)")
	f.StringVar(&o.listURL, "provider-list-url", "", "with --provider-url: URL listing entries since ?since=RFC3339, to find keys with no local record")
	f.Var(&o.headers, "provider-header", "with --provider-url: `NAME: VALUE` header to send (repeatable)")
	o.window = f.duration("settlement-window", 24*time.Hour, "how long the provider may still report a key (e.g. 48h, 3d)")
	o.ttl = f.duration("ttl", 24*time.Hour, "retention of records this command decides; use the application's TTL")
	o.lookback = f.duration("lookback", 0, "how far back provider entries are checked for a local record; older ones are listed as not compared (default: the longer of --ttl and --settlement-window)")
	f.StringVar(&o.scope, "scope", "", "reconcile only this scope (default: all)")
	f.StringVar(&o.orphanScope, "orphan-scope", "", "scope for provider keys with no local record, when the provider names none")
	f.StringVar(&o.notApplied, "not-applied", "fail", "what to do with an unknown key the provider never applied: fail, release or leave")
	f.IntVar(&o.batch, "batch-size", 500, "records read per batch")
	f.BoolVar(&o.json, "json", false, "print the report as JSON (reconcile.Report: counts, keys and findings per class, drift; see docs/cli.md)")
	f.StringVar(&o.format, "provider-format", csvprovider.FormatCSV, "layout of --provider-csv: csv, stripe-balance or adyen-settlement")
	f.Var(&o.maps, "map", "with --provider-csv: `FIELD=COLUMN` (repeatable): the column holding key, amount, currency, status, applied_at, type, scope, reference, timezone or debit")
	f.StringVar(&o.statusMap, "status-map", "", "with --provider-csv: `VALUE=OUTCOME,…` what a status (or, with no status column, type) value means: applied, failed, refund or skip")
	f.Func("type-filter", "with --provider-csv: `TYPE,…` the row types that settle intents; other rows are skipped and counted", func(s string) error {
		o.typeFilter, o.typeFilterSet = s, true
		return nil
	})
	f.StringVar(&o.amountUnit, "amount-unit", "", "with --provider-csv: amounts in major (12.50) or minor (1250) units (default: the layout's)")
	f.Var(&o.exponents, "currency-exponent", "with --provider-csv: `CUR=N` decimal digits of a currency where the provider counts them differently from ISO 4217 (repeatable)")
	f.StringVar(&o.refundKey, "refund-key", "", "with --provider-csv: `TEMPLATE` of a refund's key from its row's key, with {key} or {order} (default: <op>:vN:<order> → refund:vN:<order>)")
	f.StringVar(&o.report, "report", "", "also write a human report to `FILE` (.html, or .csv)")
	o.keyFile = f.keyFile()
	return f, o
}

// check returns a usage problem, or "".
func (o *reconcileOpts) check() string {
	switch {
	case o.dsn == "":
		return "--store is empty"
	case (o.csv == "") == (o.url == ""):
		return "give exactly one of --provider-csv and --provider-url"
	case o.csv != "" && (o.listURL != "" || len(o.headers) > 0):
		return "--provider-list-url and --provider-header go with --provider-url"
	case o.csv == "" && (len(o.maps) > 0 || o.statusMap != "" || o.typeFilterSet || o.amountUnit != "" ||
		len(o.exponents) > 0 || o.refundKey != "" || o.format != csvprovider.FormatCSV):
		return "--provider-format, --map, --status-map, --type-filter, --amount-unit, --currency-exponent and --refund-key go with --provider-csv"
	case o.report != "" && !strings.HasSuffix(strings.ToLower(o.report), ".html") && !strings.HasSuffix(strings.ToLower(o.report), ".csv"):
		return "--report: the file name must end in .html or .csv"
	case *o.window <= 0:
		return "--settlement-window must be positive"
	case o.batch <= 0:
		return "--batch-size must be positive"
	case *o.ttl <= 0:
		return "--ttl must be positive"
	}
	if _, err := reconcile.ParseAction(o.notApplied); err != nil {
		return "--not-applied: want fail, release or leave"
	}
	if o.csv != "" {
		if _, err := o.layout(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// layout is the settlement file's layout: the preset, adjusted by flags.
func (o *reconcileOpts) layout() (csvprovider.Layout, error) {
	l, err := csvprovider.Preset(o.format)
	if err != nil {
		return l, fmt.Errorf("--provider-format: want %s", strings.Join(csvprovider.Formats, ", "))
	}
	for _, m := range o.maps {
		if err := l.ParseMap(m); err != nil {
			return l, fmt.Errorf("--map: %w", err)
		}
	}
	if o.statusMap != "" {
		if err := l.ParseStatusMap(o.statusMap); err != nil {
			return l, fmt.Errorf("--status-map: %w", err)
		}
	}
	if o.typeFilterSet {
		l.SetTypes(o.typeFilter)
	}
	if o.amountUnit != "" {
		u, err := moneyfmt.ParseUnit(o.amountUnit)
		if err != nil {
			return l, errors.New("--amount-unit: want major or minor")
		}
		l.Amount.Unit = u
	}
	for _, x := range o.exponents {
		cur, n, ok := strings.Cut(x, "=")
		e, err := strconv.Atoi(n)
		if !ok || err != nil || e < 0 || e > 18 || len(cur) != 3 {
			return l, fmt.Errorf("--currency-exponent: want CUR=N (e.g. IQD=3), got %q", x)
		}
		if l.Exponents == nil {
			l.Exponents = moneyfmt.Exponents{}
		}
		l.Exponents[strings.ToUpper(cur)] = e
	}
	if o.refundKey != "" {
		rk, err := csvprovider.RefundKeyTemplate(o.refundKey)
		if err != nil {
			return l, fmt.Errorf("--refund-key: %w", err)
		}
		l.RefundKey = rk
	}
	return l, nil
}

func (o *reconcileOpts) provider() (reconcile.Provider, error) {
	if o.csv != "" {
		l, err := o.layout()
		if err != nil {
			return nil, err
		}
		return csvprovider.OpenLayout(o.csv, l)
	}
	return httpprovider.New(httpprovider.Config{URLTemplate: o.url, ListURL: o.listURL, Header: http.Header(o.headers)})
}

// run reconciles st once against prov and prints the report; the exit
// status says what it found.
func (o *reconcileOpts) run(ctx context.Context, f *flags, st idem.Store, keys *idem.Keyring, prov reconcile.Provider) int {
	stderr := f.e.stderr
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// Deciding records is what an operator does after a failover: the
	// engine logs an unsafe replication setup, but does not refuse it.
	eng, err := idem.New(st, idem.Config{TTL: *o.ttl, Logger: log, Encryption: keys, AllowAsyncReplication: true})
	if err != nil {
		return f.fail(err)
	}
	defer eng.Close()
	action, _ := reconcile.ParseAction(o.notApplied)
	start := time.Now()
	var lastLine time.Time
	r, err := reconcile.New(eng, prov, reconcile.Config{SettlementWindow: *o.window, BatchSize: o.batch, Lookback: *o.lookback,
		Scope: o.scope, OrphanScope: o.orphanScope, NotApplied: action, Actor: "idem reconcile",
		OnProgress: func(n int) {
			if now := time.Now(); now.Sub(start) >= reconcileProgressAfter && now.Sub(lastLine) >= reconcileProgressAfter/2 {
				lastLine = now
				fmt.Fprintf(stderr, "%s: %d records checked (%s)\n", f.Name(), n, now.Sub(start).Round(time.Millisecond))
			}
		}})
	if err != nil {
		return f.fail(err)
	}
	rep, runErr := r.RunOnce(ctx)
	// The report is read by an operator: its messages name their file,
	// key or URL, not the package that noticed.
	rep.Error = userText(rep.Error)
	for i, e := range rep.Errors {
		rep.Errors[i] = userText(e)
	}
	for i := range rep.Findings {
		rep.Findings[i].Detail = userText(rep.Findings[i].Detail)
	}
	if o.json {
		err = reconcile.WriteJSON(f.e.stdout, rep)
	} else {
		err = reconcile.WriteText(f.e.stdout, rep)
	}
	if err == nil && o.report != "" {
		err = writeReportFile(o.report, rep)
	}
	if err != nil {
		return f.fail(fmt.Errorf("write report: %w", err))
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "%s: run incomplete: %s\n", f.Name(), userText(runErr.Error()))
	}
	switch {
	case !rep.Clean():
		return exitFindings
	case runErr != nil || !rep.Complete():
		return exitFailure
	}
	return exitOK
}

// writeReportFile writes rep to path as HTML or CSV, by its extension,
// through a temporary file renamed into place.
func writeReportFile(path string, rep *reconcile.Report) error {
	write := reconcile.WriteHTML
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		write = reconcile.WriteCSV
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".idem-report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp, rep); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// providerHeaders collects repeated --provider-header "Name: value".
type providerHeaders http.Header

func (h *providerHeaders) String() string { return "" }

func (h *providerHeaders) Set(s string) error {
	name, val, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want NAME: VALUE, got %q", s)
	}
	if *h == nil {
		*h = providerHeaders{}
	}
	http.Header(*h).Add(strings.TrimSpace(name), strings.TrimSpace(val))
	return nil
}
