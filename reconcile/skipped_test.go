package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

// writeFile writes a settlement file into a temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// group returns the report's skipped rows for reason.
func group(rep *reconcile.Report, reason string) reconcile.SkippedRows {
	for _, g := range rep.SkippedRows {
		if g.Reason == reason {
			return g
		}
	}
	return reconcile.SkippedRows{}
}

// runOn reconciles st against prov with an engine of the given TTL, at now.
func runOn(t *testing.T, st idem.Store, prov reconcile.Provider, ttl time.Duration, now time.Time, cfg reconcile.Config) *reconcile.Report {
	t.Helper()
	eng, err := idem.New(st, idem.Config{TTL: ttl, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	r, err := reconcile.New(eng, prov, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestOlderThanLookbackIsNotClean is the docs' three-row Stripe sample
// read three days after it was written, with the defaults (a day of
// retention, a day of settlement window): its charge and refund are
// older than the look-back and have no local record. They are listed as
// unchecked, with their lines, and the run is not clean.
func TestOlderThanLookbackIsNotClean(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := now.Add(-72 * time.Hour).Format(time.DateTime)
	path := writeFile(t, "balance.csv", "id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,idempotency_key (metadata)\n"+
		"txn_1,charge,ch_1,12.50,0.61,11.89,eur,"+at+",Order 1,charge:v1:shop:o-1\n"+
		"txn_2,refund,re_1,-5.00,0.00,-5.00,eur,"+at+",Refund,charge:v1:shop:o-1\n"+
		"txn_3,payout,po_1,-7.39,0.00,-7.39,eur,"+at+",STRIPE PAYOUT,\n")
	st := memstore.New()
	defer st.Close()
	rep := runOn(t, st, provider(t, path, csvprovider.FormatStripeBalance), 24*time.Hour, now, reconcile.Config{})
	older := group(rep, "older than the look-back, no local record")
	if older.Rows != 2 || !older.Unchecked || fmt.Sprint(older.Lines) != "[2 3]" {
		t.Fatalf("older rows = %+v; want 2 unchecked rows on lines 2 and 3 (all: %+v)", older, rep.SkippedRows)
	}
	if g := group(rep, "type payout"); g.Rows != 1 || g.Unchecked {
		t.Fatalf("payout = %+v", g)
	}
	var out bytes.Buffer
	if err := reconcile.WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || rep.Unchecked() != 2 || !strings.Contains(out.String(), "result: UNCHECKED: 2 provider rows") {
		t.Fatalf("a run that left rows unchecked says:\n%s", out.String())
	}
	// With a look-back that covers them, they are under-counts: recorded.
	rep = runOn(t, st, provider(t, path, csvprovider.FormatStripeBalance), 24*time.Hour, now, reconcile.Config{Lookback: 30 * 24 * time.Hour})
	if rep.Counts[reconcile.ClassUnderCounted] != 2 || rep.Unchecked() != 0 || !rep.Complete() {
		t.Fatalf("with --lookback 30d: %+v", rep)
	}
}

// TestLookbackCoversSettlementWindow: an entry the provider reports late,
// within the settlement window but older than the retention, is compared
// by default.
func TestLookbackCoversSettlementWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	path := writeFile(t, "psp.csv", "key,amount,currency,status,applied_at\n"+
		"charge:v1:shop:o-7,1250,EUR,applied,"+now.Add(-30*time.Hour).Format(time.RFC3339)+"\n")
	st := memstore.New()
	defer st.Close()
	rep := runOn(t, st, provider(t, path, csvprovider.FormatCSV), time.Hour, now, reconcile.Config{SettlementWindow: 72 * time.Hour})
	if rep.Counts[reconcile.ClassUnderCounted] != 1 || rep.Unchecked() != 0 {
		t.Fatalf("late entry inside the window: counts %v, skipped %+v", rep.Counts, rep.SkippedRows)
	}
	if want := now.Add(-72 * time.Hour); !rep.ProviderSince.Equal(want) {
		t.Fatalf("provider_since = %s, want %s", rep.ProviderSince, want)
	}
}

// TestUnattributableRowsAreSkipped: a refund of a key idem did not make
// does not abort the run: it is listed (unchecked, with its line) and
// every other row still reconciles.
func TestUnattributableRowsAreSkipped(t *testing.T) {
	t.Parallel()
	st := seedShop(t)
	b, err := os.ReadFile(filepath.Join("testdata", "stripe-balance.csv"))
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "balance.csv", string(b)+
		"txn_x,refund,re_x,-3.00,0.00,-3.00,eur,2026-12-01 20:00:00,2026-12-01 20:00:00,Dashboard refund,-3.00,eur,,o-42,o-42\n")
	rep, err := reconcileOnce(t, st, provider(t, path, csvprovider.FormatStripeBalance), nil,
		reconcile.Config{SettlementWindow: time.Hour, Lookback: 36500 * 24 * time.Hour, OrphanScope: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	g := group(rep, "refund of a key not in idem's form (see --refund-key)")
	if g.Rows != 1 || !g.Unchecked || fmt.Sprint(g.Lines) != "[15]" {
		t.Fatalf("unattributable refund = %+v (all %+v)", g, rep.SkippedRows)
	}
	if rep.Counts[reconcile.ClassReconciled] != 5 || rep.Counts[reconcile.ClassDrift] != 2 || rep.Complete() {
		t.Fatalf("the rest of the file: counts %v, complete %v", rep.Counts, rep.Complete())
	}
}

// TestUnknownShowsIntentAmount: an unknown record not yet decidable shows
// the amount its intent carries, as money.
func TestUnknownShowsIntentAmount(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	defer st.Close()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	eng, err := idem.New(st, idem.Config{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.DoBytes(context.Background(), idem.Request{Scope: "shop", Key: "o-1", Operation: "charge",
		Intent: &idem.Intent{Operation: "charge", Amount: 1250, Currency: "EUR", ForwardKey: "charge:v1:shop:o-1"}},
		func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(errors.New("timeout")) })
	eng.Close()
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	path := writeFile(t, "empty.csv", "key,amount,currency,status,applied_at\n")
	rep := runOn(t, st, provider(t, path, csvprovider.FormatCSV), 24*time.Hour, now.Add(time.Minute), reconcile.Config{})
	if len(rep.Findings) != 1 || rep.Findings[0].Class != reconcile.ClassPending || rep.Findings[0].Local != 1250 {
		t.Fatalf("findings %+v; want the pending unknown record with its intent's 1250", rep.Findings)
	}
	var out bytes.Buffer
	if err := reconcile.WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  12.50 EUR  ") {
		t.Fatalf("text report:\n%s", out.String())
	}
}
