package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// cliStore seeds a new SQLite file with n succeeded charges of 100·i EUR
// (scope shop, keys order-i, forwarded as charge:v1:order-i) and returns
// its DSN.
func cliStore(t *testing.T, n int) string {
	t.Helper()
	var reqs []idem.Request
	for i := 1; i <= n; i++ {
		reqs = append(reqs, idem.Request{Scope: "shop", Key: idem.Key(fmt.Sprintf("order-%d", i)),
			Intent: &idem.Intent{Operation: "charge", Amount: int64(100 * i), Currency: "EUR", ForwardKey: fmt.Sprintf("charge:v1:order-%d", i)}})
	}
	return seedSQLite(t, []byte("ok"), reqs...)
}

// settlement writes a settlement file with the given amounts per order.
func settlement(t *testing.T, amounts map[int]int64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("key,amount,currency,status,applied_at\n")
	at := time.Now().UTC().Format(time.RFC3339)
	for i := 1; i <= len(amounts); i++ {
		fmt.Fprintf(&b, "charge:v1:order-%d,%d,EUR,applied,%s\n", i, amounts[i], at)
	}
	path := filepath.Join(t.TempDir(), "settlement.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSchema is a store whose records cannot be read, as a database without
// idem's schema.
type noSchema struct{ idem.Store }

func (noSchema) List(context.Context, idem.ListFilter) ([]idem.Record, error) {
	return nil, errors.New("no such table: idem_records")
}

// reconcileCLI runs idem reconcile with args.
func reconcileCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	o, e, code := runCLI(append([]string{"reconcile"}, args...)...)
	return code, o, e
}

func TestReconcileCommandClean(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 200, 3: 300})
	code, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", csv)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"3 records checked", "reconciled 3", "drift_count 0", "result: clean"} {
		if !has(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestReconcileCommandDrift(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 250, 3: 300})
	code, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", csv, "--settlement-window", "2d")
	if code != exitFindings {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"drift_amount 0.50 EUR", "drift shop order-2 charge:v1:order-2 2.00 EUR 2.50 EUR", "FOUND 1 drift"} {
		if !has(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The drift stays found on the next run (cron keeps paging), as JSON.
	code, out, _ = reconcileCLI(t, "--store", db, "--provider-csv", csv, "--json")
	var rep struct {
		Counts      map[string]int      `json:"counts"`
		Keys        map[string][]string `json:"keys"`
		DriftCount  int                 `json:"drift_count"`
		DriftAmount map[string]int64    `json:"drift_amount"`
		Oldest      *float64            `json:"oldest_unreconciled_age_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}
	if code != exitFindings || rep.DriftCount != 1 || rep.DriftAmount["EUR"] != 50 ||
		strings.Join(rep.Keys["drift"], ",") != "order-2" || rep.Counts["skipped"] != 2 || rep.Oldest == nil {
		t.Fatalf("second run: exit %d, %+v", code, rep)
	}
}

func TestReconcileCommandOverCountedAndProgress(t *testing.T) {
	old := reconcileProgressAfter
	reconcileProgressAfter = 0
	defer func() { reconcileProgressAfter = old }()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 200}) // order-3 never settled
	code, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", csv, "--settlement-window", "1ns", "--batch-size", "1")
	if code != exitFindings || !has(out, "over_counted shop order-3") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "idem reconcile: 1 records checked") {
		t.Fatalf("no progress line on stderr:\n%s", errs)
	}
}

func TestReconcileCommandUsage(t *testing.T) {
	t.Parallel()
	code, out, _ := reconcileCLI(t, "--help")
	if code != exitOK || !strings.Contains(out, "usage: idem reconcile [--store DSN]") ||
		!strings.Contains(out, "example:\n  idem reconcile --store") || !strings.Contains(out, "\n  --settlement-window DUR\n") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	for name, args := range map[string][]string{
		"empty store":     {"--store", "", "--provider-csv", "x.csv"},
		"no provider":     {"--store", "x.db"},
		"both providers":  {"--store", "x.db", "--provider-csv", "x.csv", "--provider-url", "http://p/{key}"},
		"bad window":      {"--store", "x.db", "--provider-csv", "x.csv", "--settlement-window", "soon"},
		"zero window":     {"--store", "x.db", "--provider-csv", "x.csv", "--settlement-window", "0"},
		"window overflow": {"--store", "x.db", "--provider-csv", "x.csv", "--settlement-window", "213504d"},
		"ttl overflow":    {"--store", "x.db", "--provider-csv", "x.csv", "--ttl", "106752d"},
		"bad action":      {"--store", "x.db", "--provider-csv", "x.csv", "--not-applied", "ignore"},
		"unknown flag":    {"--store", "x.db", "--provider-csv", "x.csv", "--colour"},
		"stray argument":  {"--store", "x.db", "--provider-csv", "x.csv", "extra"},
		"header with csv": {"--store", "x.db", "--provider-csv", "x.csv", "--provider-header", "A: b"},
	} {
		code, _, errs := reconcileCLI(t, args...)
		if code != exitUsage || !strings.HasSuffix(errs, "\nRun 'idem reconcile --help' for usage.\n") || strings.Count(errs, "\n") != 2 {
			t.Errorf("%s: exit %d, want 2 and one line with where the help is\n%s", name, code, errs)
		}
	}
}

func TestReconcileCommandFailures(t *testing.T) {
	t.Parallel()
	csv := settlement(t, map[int]int64{1: 100})
	code, _, errs := reconcileCLI(t, "--store", cliStore(t, 1), "--provider-csv", filepath.Join(t.TempDir(), "absent.csv"))
	if code != exitFailure || !strings.Contains(errs, "absent.csv") {
		t.Fatalf("absent CSV: exit %d\n%s", code, errs)
	}
	missing := "sqlite://" + filepath.Join(t.TempDir(), "absent.db")
	code, _, errs = reconcileCLI(t, "--store", missing, "--provider-csv", csv)
	if code != exitFailure || !strings.Contains(errs, "absent.db") {
		t.Fatalf("store failure: exit %d\n%s", code, errs)
	}
	code, out2, errs := reconcileCLI(t, "--store", cliStore(t, 1), "--provider-url", "http://127.0.0.1:1/charges/{key}", "--settlement-window", "1ns")
	if code != exitFailure || !has(out2, "pending 1") || !strings.Contains(out2, "error: order-1: ") || !strings.Contains(out2, "127.0.0.1:1/charges/charge:v1:order-1") || !has(out2, "pending shop order-1 charge:v1:order-1 1.00 EUR -") || strings.Contains(out2, "httpprovider:") ||
		!strings.Contains(out2, "result: UNDECIDED: 1 keys could not be decided") {
		t.Fatalf("unreachable provider: exit %d\n%s\n%s", code, out2, errs)
	}
}

// TestReconcileCommandIncomplete: a run that stops (here: a store whose records
// cannot be read, as a database without the schema) never prints a clean
// result, in the table or in JSON.
func TestReconcileCommandIncomplete(t *testing.T) {
	t.Parallel()
	csv := settlement(t, map[int]int64{1: 100})
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		f, o := reconcileFlags(&env{stdout: &out, stderr: &errb})
		if _, code, ok := f.parse(append([]string{"--provider-csv", csv}, args...)); !ok {
			t.Fatalf("parse: %d", code)
		}
		prov, err := o.provider()
		if err != nil {
			t.Fatal(err)
		}
		return o.run(context.Background(), f, noSchema{memstore.New()}, nil, prov), out.String(), errb.String()
	}
	code, out, errs := run()
	if code != exitFailure || strings.Contains(out, "result: clean") || !strings.Contains(out, "result: INCOMPLETE: the run stopped:") {
		t.Fatalf("table: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run("--json")
	var rep struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitFailure || rep.Error == "" {
		t.Fatalf("JSON: exit %d, error %q (%v)\n%s", code, rep.Error, err, out)
	}
}

// TestReconcileCommandLookback: the report says how far back provider
// entries were compared; an entry older than that with no local record is
// not recorded but listed as not compared, and the run is not clean
// (exit 1) until the look-back covers it.
func TestReconcileCommandLookback(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 1)
	old := time.Now().Add(-30 * time.Hour).UTC().Format(time.RFC3339)
	csv := filepath.Join(t.TempDir(), "s.csv")
	body := "key,amount,currency,status,applied_at,scope\ncharge:v1:order-1,100,EUR,applied," + old + ",shop\nlost,900,EUR,applied," + old + ",shop\n"
	if err := os.WriteFile(csv, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", csv)
	if code != exitFailure || !strings.Contains(out, "provider entries applied since ") || !has(out, "under_counted 0") ||
		!has(out, "older than the look-back, no local record 1 NO: may hide a duplicate 3") ||
		!strings.Contains(out, "result: UNCHECKED: 1 provider rows") {
		t.Fatalf("default look-back (--ttl 24h): exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = reconcileCLI(t, "--store", db, "--provider-csv", csv, "--lookback", "2d")
	if code != exitOK || !has(out, "under_counted 1") {
		t.Fatalf("--lookback 2d: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestReconcileCommandLayoutUsage(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 1)
	csv := settlement(t, map[int]int64{1: 100})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider-url", "http://x/{key}", "--provider-format", "stripe-balance"}, "go with --provider-csv"},
		{[]string{"--provider-csv", csv, "--provider-format", "paypal"}, "--provider-format: want csv, stripe-balance, adyen-settlement"},
		{[]string{"--provider-csv", csv, "--map", "colour=Farbe"}, `unknown field "colour"`},
		{[]string{"--provider-csv", csv, "--status-map", "captured=maybe"}, `unknown outcome "maybe"`},
		{[]string{"--provider-csv", csv, "--amount-unit", "cents"}, "--amount-unit: want major or minor"},
		{[]string{"--provider-csv", csv, "--currency-exponent", "IQD"}, "--currency-exponent: want CUR=N"},
		{[]string{"--provider-csv", csv, "--refund-key", "refund"}, "names neither {key} nor {order}"},
		{[]string{"--provider-csv", csv, "--report", "out.pdf"}, "must end in .html or .csv"},
	} {
		code, _, errs := reconcileCLI(t, append([]string{"--store", db}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// A settlement file in another layout is read through the flags.
	path := filepath.Join(t.TempDir(), "psp.csv")
	if err := os.WriteFile(path, []byte("ref,gross,cur,kind,booked\ncharge:v1:order-1,1.00,EUR,sale,"+
		time.Now().UTC().Format(time.RFC3339)+"\n,0.30,EUR,fee,"+time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", path, "--map", "key=ref", "--map", "amount=gross",
		"--map", "currency=cur", "--map", "type=kind", "--map", "applied_at=booked", "--status-map", "sale=applied",
		"--type-filter", "sale", "--amount-unit", "major")
	if code != exitOK || !has(out, "reconciled 1") || !has(out, "type fee 1") {
		t.Fatalf("mapped file: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestReconcileCommand runs `idem reconcile` through the CLI on a real
// SQLite file: a clean settlement file exits 0, a planted drift exits 3 and
// is printed. (Every class and flag is tested in package reconcile.)
func TestReconcileCommand(t *testing.T) {
	ctx := context.Background()
	csv := func(amount2 int) string {
		at := time.Now().UTC().Format(time.RFC3339)
		body := "key,amount,currency,status,applied_at\n" +
			fmt.Sprintf("charge:v1:order-1,100,EUR,applied,%s\ncharge:v1:order-2,%d,EUR,applied,%s\ncharge:v1:order-3,300,EUR,applied,%s\n", at, amount2, at, at)
		p := filepath.Join(t.TempDir(), "settlement.csv")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out, errb strings.Builder
	if code := run(ctx, []string{"reconcile", "--store", cliStore(t, 3), "--provider-csv", csv(200)}, &out, &errb); code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	code := run(ctx, []string{"reconcile", "--store", cliStore(t, 3), "--provider-csv", csv(250)}, &out, &errb)
	if code != 3 || !strings.Contains(out.String(), "drift") {
		t.Fatalf("planted drift: exit %d, want 3\n%s%s", code, out.String(), errb.String())
	}
}

// TestReconcileUnusableStore: a DSN reconcile cannot use is a usage error
// (exit 2), memory:// included: a fresh memory store would report clean
// without having looked at a record.
func TestReconcileUnusableStore(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "s.csv")
	if err := os.WriteFile(csv, []byte("key,amount,currency,status,applied_at\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{"memory://", "foo://x", "no-scheme"} {
		var out, errb strings.Builder
		code := run(context.Background(), []string{"reconcile", "--store", dsn, "--provider-csv", csv}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "--store") {
			t.Errorf("--store %s: exit %d, want 2\n%s%s", dsn, code, out.String(), errb.String())
		}
	}
}

// TestReconcileCommandHostileKeys: keys written in a provider's file reach
// the terminal and the reports escaped — a key carrying terminal escapes
// cannot clear the screen, a key that is a spreadsheet formula stays text
// in the CSV report.
func TestReconcileCommandHostileKeys(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 1)
	at := time.Now().UTC().Format(time.RFC3339)
	path := filepath.Join(t.TempDir(), "psp.csv")
	body := "key,amount,currency,status,applied_at,scope\n" +
		`"=HYPERLINK(""http://evil/"",""open"")",100,EUR,applied,` + at + ",shop\n" +
		"evil\x1b[2J\x1b]0;owned\x07,100,EUR,applied," + at + ",shop\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "out.csv")
	_, out, errs := reconcileCLI(t, "--store", db, "--provider-csv", path, "--report", report)
	if strings.ContainsAny(out+errs, "\x1b\x07") || !strings.Contains(out, `\x1b[2J`) {
		t.Fatalf("the terminal got raw escapes, or none shown:\n%q\n%q", out, errs)
	}
	_, js, _ := reconcileCLI(t, "--store", db, "--provider-csv", path, "--json")
	if strings.ContainsAny(js, "\x1b\x07") {
		t.Fatalf("--json carries raw escapes:\n%q", js)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"'=HYPERLINK(""http://evil/"",""open"")"`) || strings.ContainsAny(string(b), "\x1b\x07") {
		t.Fatalf("CSV report:\n%s", b)
	}
}
