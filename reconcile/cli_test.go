package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

// cliStores are the stores the command opens, by --store: memstores that
// cliStore seeded.
var cliStores sync.Map // string → *memstore.Store

// keepOpen is a store the command may close without closing it: a test
// runs the command more than once on one seeded store.
type keepOpen struct{ idem.Store }

func (keepOpen) Close() error { return nil }

// cliStore seeds a store with n succeeded charges of 100·i EUR and returns
// the --store value that opens it; the store is closed when t ends.
func cliStore(t *testing.T, n int) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "idem")
	ctx := context.Background()
	st := memstore.New()
	cliStores.Store(name, st)
	t.Cleanup(func() { cliStores.Delete(name); _ = st.Close() })
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for i := 1; i <= n; i++ {
		_, err := eng.DoBytes(ctx, idem.Request{Scope: "shop", Key: idem.Key(fmt.Sprintf("order-%d", i)),
			Intent: &idem.Intent{Operation: "charge", Amount: int64(100 * i), Currency: "EUR", ForwardKey: fmt.Sprintf("charge:v1:order-%d", i)}},
			func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	return name
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

func openSeeded(_ context.Context, dsn string) (idem.Store, error) {
	st, ok := cliStores.Load(dsn)
	if !ok {
		return nil, fmt.Errorf("no store %q", dsn)
	}
	return keepOpen{st.(*memstore.Store)}, nil
}

// noSchema is a store whose records cannot be read, as a database without
// idem's schema.
type noSchema struct{ idem.Store }

func (noSchema) List(context.Context, idem.ListFilter) ([]idem.Record, error) {
	return nil, errors.New("no such table: idem_records")
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = reconcile.RunReconcileCommand(context.Background(), args, &out, &errb, openSeeded)
	return code, out.String(), errb.String()
}

// has reports whether out contains want, comparing runs of spaces as one
// (the table's column widths depend on its content).
func has(out, want string) bool {
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return strings.Contains(squash(out), squash(want))
}

func TestCommandClean(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 200, 3: 300})
	code, out, errs := runCLI(t, "--store", db, "--provider-csv", csv)
	if code != reconcile.ExitClean {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"3 records checked", "reconciled 3", "drift_count 0", "result: clean"} {
		if !has(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestCommandDrift(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 250, 3: 300})
	code, out, errs := runCLI(t, "--store", db, "--provider-csv", csv, "--settlement-window", "2d")
	if code != reconcile.ExitFound {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"drift_amount EUR 50", "drift shop order-2 charge:v1:order-2 200 EUR 250 EUR", "FOUND 1 drift"} {
		if !has(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The drift stays found on the next run (cron keeps paging), as JSON.
	code, out, _ = runCLI(t, "--store", db, "--provider-csv", csv, "--json")
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
	if code != reconcile.ExitFound || rep.DriftCount != 1 || rep.DriftAmount["EUR"] != 50 ||
		strings.Join(rep.Keys["drift"], ",") != "order-2" || rep.Counts["skipped"] != 2 || rep.Oldest == nil {
		t.Fatalf("second run: exit %d, %+v", code, rep)
	}
}

func TestCommandOverCountedAndProgress(t *testing.T) {
	defer reconcile.SetProgressAfter(0)()
	db := cliStore(t, 3)
	csv := settlement(t, map[int]int64{1: 100, 2: 200}) // order-3 never settled
	code, out, errs := runCLI(t, "--store", db, "--provider-csv", csv, "--settlement-window", "1ns", "--batch-size", "1")
	if code != reconcile.ExitFound || !has(out, "over_counted shop order-3") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "idem reconcile: 1 records checked") {
		t.Fatalf("no progress line on stderr:\n%s", errs)
	}
}

func TestCommandUsage(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "--help")
	if code != reconcile.ExitClean || !strings.Contains(out, "usage: idem reconcile [--store DSN]") ||
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
		code, _, errs := runCLI(t, args...)
		if code != reconcile.ExitUsage || !strings.HasSuffix(errs, "\nRun 'idem reconcile --help' for usage.\n") || strings.Count(errs, "\n") != 2 {
			t.Errorf("%s: exit %d, want 2 and one line with where the help is\n%s", name, code, errs)
		}
	}
}

func TestCommandFailures(t *testing.T) {
	t.Parallel()
	csv := settlement(t, map[int]int64{1: 100})
	code, _, errs := runCLI(t, "--store", cliStore(t, 1), "--provider-csv", filepath.Join(t.TempDir(), "absent.csv"))
	if code != reconcile.ExitFailure || !strings.Contains(errs, "absent.csv") {
		t.Fatalf("absent CSV: exit %d\n%s", code, errs)
	}
	var out, errb bytes.Buffer
	code = reconcile.RunReconcileCommand(context.Background(), []string{"--store", "db", "--provider-csv", csv}, &out, &errb,
		func(context.Context, string) (idem.Store, error) { return nil, errors.New("no such database") })
	if code != reconcile.ExitFailure || !strings.Contains(errb.String(), "no such database") {
		t.Fatalf("store failure: exit %d\n%s", code, errb.String())
	}
	code, out2, errs := runCLI(t, "--store", cliStore(t, 1), "--provider-url", "http://127.0.0.1:1/charges/{key}", "--settlement-window", "1ns")
	if code != reconcile.ExitFailure || !has(out2, "pending 1") || !strings.Contains(out2, "error: order-1: httpprovider:") ||
		!strings.Contains(out2, "result: UNDECIDED: 1 keys could not be decided") {
		t.Fatalf("unreachable provider: exit %d\n%s\n%s", code, out2, errs)
	}
	code = reconcile.RunReconcileCommand(context.Background(), []string{"--store", "x", "--provider-csv", csv}, &out, &errb,
		func(context.Context, string) (idem.Store, error) {
			return nil, fmt.Errorf("%w: bad scheme", reconcile.ErrUsage)
		})
	if code != reconcile.ExitUsage {
		t.Fatalf("unusable DSN: exit %d, want 2", code)
	}
}

// TestCommandIncomplete: a run that stops (here: a store whose records
// cannot be read, as a database without the schema) never prints a clean
// result, in the table or in JSON.
func TestCommandIncomplete(t *testing.T) {
	t.Parallel()
	csv := settlement(t, map[int]int64{1: 100})
	empty := func(context.Context, string) (idem.Store, error) { return noSchema{memstore.New()}, nil }
	var out, errb bytes.Buffer
	code := reconcile.RunReconcileCommand(context.Background(), []string{"--store", "x", "--provider-csv", csv}, &out, &errb, empty)
	if code != reconcile.ExitFailure || strings.Contains(out.String(), "result: clean") || !strings.Contains(out.String(), "result: INCOMPLETE: the run stopped:") {
		t.Fatalf("table: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	out.Reset()
	code = reconcile.RunReconcileCommand(context.Background(), []string{"--store", "x", "--provider-csv", csv, "--json"}, &out, &errb, empty)
	var rep struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != reconcile.ExitFailure || rep.Error == "" {
		t.Fatalf("JSON: exit %d, error %q (%v)\n%s", code, rep.Error, err, out.String())
	}
}

// TestCommandLookback: the report says how far back provider entries were
// compared, and an entry older than that is not recorded.
func TestCommandLookback(t *testing.T) {
	t.Parallel()
	db := cliStore(t, 1)
	old := time.Now().Add(-30 * time.Hour).UTC().Format(time.RFC3339)
	csv := filepath.Join(t.TempDir(), "s.csv")
	body := "key,amount,currency,status,applied_at,scope\ncharge:v1:order-1,100,EUR,applied," + old + ",shop\nlost,900,EUR,applied," + old + ",shop\n"
	if err := os.WriteFile(csv, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "--store", db, "--provider-csv", csv)
	if code != reconcile.ExitClean || !strings.Contains(out, "provider entries applied since ") || !has(out, "under_counted 0") {
		t.Fatalf("default look-back (--ttl 24h): exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "--store", db, "--provider-csv", csv, "--lookback", "2d")
	if code != reconcile.ExitClean || !has(out, "under_counted 1") {
		t.Fatalf("--lookback 2d: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestCommandLayoutUsage(t *testing.T) {
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
		code, _, errs := runCLI(t, append([]string{"--store", db}, tc.args...)...)
		if code != reconcile.ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// A settlement file in another layout is read through the flags.
	path := filepath.Join(t.TempDir(), "psp.csv")
	if err := os.WriteFile(path, []byte("ref,gross,cur,kind,booked\ncharge:v1:order-1,1.00,EUR,sale,"+
		time.Now().UTC().Format(time.RFC3339)+"\n,0.30,EUR,fee,"+time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "--store", db, "--provider-csv", path, "--map", "key=ref", "--map", "amount=gross",
		"--map", "currency=cur", "--map", "type=kind", "--map", "applied_at=booked", "--status-map", "sale=applied",
		"--type-filter", "sale", "--amount-unit", "major")
	if code != reconcile.ExitClean || !has(out, "reconciled 1") || !has(out, "type fee 1") {
		t.Fatalf("mapped file: exit %d\n%s\n%s", code, out, errs)
	}
}
