package reconcile

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/durations"
	"github.com/idemkit/idem/reconcile/csvprovider"
	"github.com/idemkit/idem/reconcile/httpprovider"
	moneyfmt "github.com/idemkit/idem/reconcile/money"
)

// Exit codes of [RunReconcileCommand].
const (
	ExitClean   = 0 // nothing to investigate
	ExitFailure = 1 // the run failed, or some keys could not be decided
	ExitUsage   = 2 // bad flags
	ExitFound   = 3 // drift or over-counted keys were found
)

// ErrUsage, wrapped in the error of [RunReconcileCommand]'s open function,
// says the DSN itself cannot be used (malformed, an unknown scheme, a store
// that cannot hold the application's records): the command exits with
// [ExitUsage] rather than [ExitFailure].
var ErrUsage = errors.New("unusable store DSN")

const synopsis = "idem reconcile [--store DSN] (--provider-csv FILE [--provider-format csv|stripe-balance|adyen-settlement] | --provider-url TEMPLATE) [--settlement-window DUR] [--json] [--report FILE.html|FILE.csv] [--encryption-key-file FILE]"

const about = `Compare the store's records with the provider's view, by forwarded key:
  provider applied, local none/unknown  → recorded (under_counted)
  local succeeded, provider none after the settlement window → flagged (over_counted)
  both agree                            → marked reconciled; later runs skip it
  amount or currency differs            → flagged (drift)
  local unknown, provider never applied → failed (or --not-applied) after the window

A settlement file is read in idem's own layout (csv: integer minor units,
RFC 3339 times) or a provider's: stripe-balance (the balance-transaction
export, key in "idempotency_key (metadata)") or adyen-settlement (the
settlement details report, key in "Merchant Reference"). --map, --status-map,
--type-filter and --amount-unit adjust a layout to any other file. Rows that
settle no intent (fees, payouts, adjustments) are skipped and counted by
reason; refunds are matched to the refund key of the same order.

Prints a table (or --json) on stdout, and with --report a human report
(HTML, or CSV by the file's extension). On long runs, progress lines go to
stderr; resolutions are logged on stderr.

Exit status: 0 clean; 3 drift or over-counted keys found (they take
precedence); 1 the run failed or some keys could not be decided; 2 usage.`

const example = `idem reconcile --store postgres://idem@db/payments --provider-csv balance_transactions.csv --provider-format stripe-balance --settlement-window 48h --report reconcile.html`

// progressAfter is how long a run goes before progress lines are printed.
var progressAfter = 2 * time.Second

type cliOptions struct {
	dsn, csv, url, listURL, scope, orphanScope, notApplied string
	window, ttl, lookback                                  time.Duration
	batch                                                  int
	json                                                   bool
	headers                                                headerFlag
	format, statusMap, typeFilter, amountUnit, refundKey   string
	report                                                 string
	maps, exponents                                        listFlag
	typeFilterSet                                          bool
	keyFile                                                string
	keys                                                   *idem.Keyring
}

// listFlag collects a repeatable flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// RunReconcileCommand runs `idem reconcile` with args (the arguments after
// "reconcile"), writing the report to stdout and diagnostics to stderr, and
// returns the exit status: [ExitClean], [ExitFound], [ExitFailure] or
// [ExitUsage]. open opens the store named by a DSN.
func RunReconcileCommand(ctx context.Context, args []string, stdout, stderr io.Writer, open func(ctx context.Context, dsn string) (idem.Store, error)) int {
	fs, o := newFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stdout)
			return ExitClean
		}
		return usageError(stderr, strings.Replace(err.Error(), ": -", ": --", 1))
	}
	if msg := o.check(fs); msg != "" {
		return usageError(stderr, msg)
	}
	if o.keyFile != "" {
		k, err := idem.LoadKeyring(o.keyFile)
		if err != nil {
			return usageError(stderr, "--encryption-key-file: "+err.Error())
		}
		o.keys = k
	}
	prov, err := o.provider()
	if err != nil {
		fmt.Fprintf(stderr, "idem reconcile: %v\n", err)
		return ExitFailure
	}
	st, err := open(ctx, o.dsn)
	if errors.Is(err, ErrUsage) {
		return usageError(stderr, "--store: "+err.Error())
	}
	if err != nil {
		fmt.Fprintf(stderr, "idem reconcile: open store: %v\n", err)
		return ExitFailure
	}
	defer st.Close()
	return o.run(ctx, st, prov, stdout, stderr)
}

func newFlagSet(stderr io.Writer) (*flag.FlagSet, *cliOptions) {
	o := &cliOptions{window: 24 * time.Hour, ttl: 24 * time.Hour}
	fs := flag.NewFlagSet("idem reconcile", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line, by usageError
	fs.Usage = func() {}
	fs.StringVar(&o.dsn, "store", DefaultStore, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…")
	fs.StringVar(&o.csv, "provider-csv", "", "settlement file: CSV with header key,amount,currency,status,applied_at[,scope]")
	fs.StringVar(&o.url, "provider-url", "", "lookup URL template with {key}, answering JSON (404 = not applied)")
	fs.StringVar(&o.listURL, "provider-list-url", "", "with --provider-url: URL listing entries since ?since=RFC3339, to find keys with no local record")
	fs.Var(&o.headers, "provider-header", "with --provider-url: `NAME: VALUE` header to send (repeatable)")
	fs.Var(durationValue{&o.window}, "settlement-window", "how long the provider may still report a key (e.g. 48h, 3d)")
	fs.Var(durationValue{&o.ttl}, "ttl", "retention of records this command decides; use the application's TTL")
	fs.Var(durationValue{&o.lookback}, "lookback", "how far back provider entries are checked for a local record (default: --ttl)")
	fs.StringVar(&o.scope, "scope", "", "reconcile only this scope (default: all)")
	fs.StringVar(&o.orphanScope, "orphan-scope", "", "scope for provider keys with no local record, when the provider names none")
	fs.StringVar(&o.notApplied, "not-applied", "fail", "what to do with an unknown key the provider never applied: fail, release or leave")
	fs.IntVar(&o.batch, "batch-size", 500, "records read per batch")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.format, "provider-format", csvprovider.FormatCSV, "layout of --provider-csv: csv, stripe-balance or adyen-settlement")
	fs.Var(&o.maps, "map", "with --provider-csv: `FIELD=COLUMN` (repeatable): the column holding key, amount, currency, status, applied_at, type, scope, reference, timezone or debit")
	fs.StringVar(&o.statusMap, "status-map", "", "with --provider-csv: `VALUE=OUTCOME,…` what a status (or, with no status column, type) value means: applied, failed, refund or skip")
	fs.Func("type-filter", "with --provider-csv: `TYPE,…` the row types that settle intents; other rows are skipped and counted", func(s string) error {
		o.typeFilter, o.typeFilterSet = s, true
		return nil
	})
	fs.StringVar(&o.amountUnit, "amount-unit", "", "with --provider-csv: amounts in major (12.50) or minor (1250) units (default: the layout's)")
	fs.Var(&o.exponents, "currency-exponent", "with --provider-csv: `CUR=N` decimal digits of a currency where the provider differs from the CLDR table (repeatable)")
	fs.StringVar(&o.refundKey, "refund-key", "", "with --provider-csv: `TEMPLATE` of a refund's key from its row's key, with {key} or {order} (default: <op>:vN:<order> → refund:vN:<order>)")
	fs.StringVar(&o.report, "report", "", "also write a human report to `FILE` (.html, or .csv)")
	fs.StringVar(&o.keyFile, "encryption-key-file", "", "`FILE` of the keys the records are encrypted with at rest (lines ID:BASE64, the first is current; see idem proxy --help)")
	return fs, o
}

// DefaultStore is the --store the command reads when none is given: the
// CLI's default, the SQLite file idem proxy writes in its working
// directory.
const DefaultStore = "sqlite://idem.db"

// usage prints the full help, flags in the --flag form the docs use.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", synopsis, about)
	fs.VisitAll(func(fl *flag.Flag) {
		name, help := flag.UnquoteUsage(fl)
		if _, ok := fl.Value.(durationValue); ok {
			name = "DUR"
		}
		line := "  --" + fl.Name
		if name != "" && name != "value" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, help)
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && fl.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\nexample:\n  %s\n", example)
}

// usageError reports a usage mistake in one line and where the help is.
func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "idem reconcile: %s\nRun 'idem reconcile --help' for usage.\n", msg)
	return ExitUsage
}

// check returns a usage problem, or "".
func (o *cliOptions) check(fs *flag.FlagSet) string {
	switch {
	case fs.NArg() > 0:
		return fmt.Sprintf("unexpected argument %q", fs.Arg(0))
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
	case o.window <= 0:
		return "--settlement-window must be positive"
	case o.batch <= 0:
		return "--batch-size must be positive"
	case o.ttl <= 0:
		return "--ttl must be positive"
	}
	if _, err := ParseAction(o.notApplied); err != nil {
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
func (o *cliOptions) layout() (csvprovider.Layout, error) {
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

func (o *cliOptions) provider() (Provider, error) {
	if o.csv != "" {
		l, err := o.layout()
		if err != nil {
			return nil, err
		}
		return csvprovider.OpenLayout(o.csv, l)
	}
	return httpprovider.New(httpprovider.Config{URLTemplate: o.url, ListURL: o.listURL, Header: http.Header(o.headers)})
}

func (o *cliOptions) run(ctx context.Context, st idem.Store, prov Provider, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	eng, err := idem.New(st, idem.Config{TTL: o.ttl, Logger: log, Encryption: o.keys})
	if err != nil {
		fmt.Fprintf(stderr, "idem reconcile: %v\n", err)
		return ExitFailure
	}
	defer eng.Close()
	action, _ := ParseAction(o.notApplied)
	start := time.Now()
	var lastLine time.Time
	r, err := New(eng, prov, Config{SettlementWindow: o.window, BatchSize: o.batch, Lookback: o.lookback,
		Scope: o.scope, OrphanScope: o.orphanScope, NotApplied: action, Actor: "idem reconcile",
		OnProgress: func(n int) {
			if now := time.Now(); now.Sub(start) >= progressAfter && now.Sub(lastLine) >= progressAfter/2 {
				lastLine = now
				fmt.Fprintf(stderr, "idem reconcile: %d records checked (%s)\n", n, now.Sub(start).Round(time.Millisecond))
			}
		}})
	if err != nil {
		fmt.Fprintf(stderr, "idem reconcile: %v\n", err)
		return ExitFailure
	}
	rep, runErr := r.RunOnce(ctx)
	if o.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err == nil && o.report != "" {
		err = writeReportFile(o.report, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idem reconcile: write report: %v\n", err)
		return ExitFailure
	}
	return exitCode(rep, runErr, stderr)
}

func exitCode(rep *Report, runErr error, stderr io.Writer) int {
	if runErr != nil {
		fmt.Fprintf(stderr, "idem reconcile: run incomplete: %v\n", runErr)
	}
	switch {
	case !rep.Clean():
		return ExitFound
	case runErr != nil || len(rep.Errors) > 0:
		return ExitFailure
	}
	return ExitClean
}

// durationValue is a flag.Value for durations that also accepts days
// ("3d", "1d12h"), because settlement windows are counted in days.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := durations.Parse(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// headerFlag collects repeated "Name: value" flags.
type headerFlag http.Header

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(s string) error {
	name, val, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want NAME: VALUE, got %q", s)
	}
	if *h == nil {
		*h = headerFlag{}
	}
	http.Header(*h).Add(strings.TrimSpace(name), strings.TrimSpace(val))
	return nil
}
