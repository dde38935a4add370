package csvprovider_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

func mustPreset(t testing.TB, name string) csvprovider.Layout {
	t.Helper()
	l, err := csvprovider.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// skipped prints skipped rows as "reason rows [lines] unchecked|…".
func skipped(gs []reconcile.SkippedRows) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%s %d %v %v", g.Reason, g.Rows, g.Lines, g.Unchecked))
	}
	return strings.Join(parts, "|")
}

func TestStripePreset(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../testdata/stripe-balance.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := csvprovider.ParseLayout(f, mustPreset(t, csvprovider.FormatStripeBalance))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for key, want := range map[string]reconcile.Applied{
		"charge:v1:shop:o-1001": {Amount: 1250, Currency: "EUR", Reference: "ch_3Qf0Ex2eZvKYlo2C1a2b3c4d", AppliedAt: time.Date(2026, 11, 28, 9, 14, 7, 0, time.UTC)},
		"charge:v1:shop:o-1002": {Amount: 5000, Currency: "JPY"},
		"charge:v1:shop:o-1003": {Amount: 12345, Currency: "KWD"},
		"charge:v1:shop:o-1008": {Amount: 125000, Currency: "EUR"},
		"refund:v1:shop:o-1001": {Amount: 500, Currency: "EUR", Reference: "re_3Qf0Ex2eZvKYlo2C2b3c4d5e"},
	} {
		got, err := p.Lookup(ctx, key)
		if err != nil || got.Amount != want.Amount || got.Currency != want.Currency || got.Status != reconcile.StatusApplied ||
			(want.Reference != "" && got.Reference != want.Reference) || (!want.AppliedAt.IsZero() && !got.AppliedAt.Equal(want.AppliedAt)) {
			t.Errorf("Lookup(%s) = %+v, %v; want %+v", key, got, err, want)
		}
	}
	if p.Len() != 9 {
		t.Errorf("%d entries, want 9", p.Len())
	}
	want := "no key 1 [11] false|type adjustment 1 [13] false|type payout 1 [14] false|type stripe_fee 1 [12] false"
	if got := skipped(p.SkippedRows()); got != want {
		t.Errorf("SkippedRows = %s, want %s", got, want)
	}
}

func TestAdyenPresetTimeZones(t *testing.T) {
	t.Parallel()
	head := "Psp Reference,Merchant Reference,Creation Date,TimeZone,Type,Gross Currency,Gross Debit (GC),Gross Credit (GC)\n"
	in := head +
		"1,charge:v1:a,2026-07-01 12:00:00,CEST,Settled,EUR,,1.00\n" +
		"2,charge:v1:b,2026-12-01 12:00:00,CET,Settled,KWD,,1.5\n" +
		"3,charge:v1:c,2026-12-01 12:00:00,America/New_York,Settled,JPY,,100\n" +
		"4,charge:v1:a,2026-12-02 08:00:00,UTC,Refunded,EUR,0.40,\n"
	p, err := csvprovider.ParseLayout(strings.NewReader(in), mustPreset(t, csvprovider.FormatAdyenSettlement))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for key, want := range map[string]struct {
		amount int64
		at     time.Time
	}{
		"charge:v1:a": {100, time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)},
		"charge:v1:b": {1500, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)},
		"charge:v1:c": {100, time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)},
		"refund:v1:a": {40, time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)},
	} {
		got, err := p.Lookup(ctx, key)
		if err != nil || got.Amount != want.amount || !got.AppliedAt.Equal(want.at) {
			t.Errorf("Lookup(%s) = %+v, %v; want %d at %s", key, got, err, want.amount, want.at)
		}
	}
	for name, tc := range map[string]struct{ row, want string }{
		"ambiguous zone": {"1,k:v1:x,2026-12-01 12:00:00,CST,Settled,EUR,,1.00", `time zone "CST"`},
		"bad date":       {"1,k:v1:x,2026-12-01T12:00:00Z,CET,Settled,EUR,,1.00", "not a time in the form 2006-01-02 15:04:05"},
		"too precise":    {"1,k:v1:x,2026-12-01 12:00:00,CET,Settled,JPY,,1.5", "more than 0 decimals"},
		"bad currency":   {"1,k:v1:x,2026-12-01 12:00:00,CET,Settled,XYZ,,1.00", `line 2, column 6 (Gross Currency): "XYZ" is not an ISO 4217 currency`},
		"bad amount":     {"1,k:v1:x,2026-12-01 12:00:00,CET,Settled,EUR,,1.0.0", `line 2, column 8 (Gross Credit (GC)): "1.0.0" is not a number`},
		"bad debit":      {"1,k:v1:x,2026-12-01 12:00:00,CET,Refunded,EUR,1.005,", `line 2, column 7 (Gross Debit (GC)): "1.005" has more than 2 decimals (EUR has 2)`},
	} {
		_, err := csvprovider.ParseLayout(strings.NewReader(head+tc.row+"\n"), mustPreset(t, csvprovider.FormatAdyenSettlement))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
}

func TestMappedLayout(t *testing.T) {
	t.Parallel()
	l := mustPreset(t, csvprovider.FormatCSV)
	for _, m := range []string{"key=Reference", "amount=Gross", "currency=Cur", "status=State", "applied_at=When", "type=Kind"} {
		if err := l.ParseMap(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ParseStatusMap("captured=applied, REFUNDED=refund, voided=failed, pending=skip"); err != nil {
		t.Fatal(err)
	}
	l.SetTypes("sale, refund")
	rk, err := csvprovider.RefundKeyTemplate("refund-{key}")
	if err != nil {
		t.Fatal(err)
	}
	l.RefundKey = rk
	in := "Reference,Gross,Cur,State,When,Kind\n" +
		"order-1,1250,eur,captured,2026-12-01T19:05:02Z,sale\n" +
		"order-1,-500,eur,refunded,2026-12-01T20:00:00Z,refund\n" +
		"order-2,990,eur,voided,2026-12-01T20:00:00Z,sale\n" +
		"order-3,990,eur,pending,2026-12-01T20:00:00Z,sale\n" +
		",0,eur,captured,2026-12-01T20:00:00Z,fee\n"
	p, err := csvprovider.ParseLayout(strings.NewReader(in), l)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := p.Lookup(ctx, "refund-order-1"); err != nil || a.Amount != -500 || a.Status != reconcile.StatusApplied {
		t.Errorf("refund = %+v, %v", a, err)
	}
	if a, err := p.Lookup(ctx, "order-2"); err != nil || a.Status != reconcile.StatusFailed {
		t.Errorf("voided = %+v, %v", a, err)
	}
	if got := skipped(p.SkippedRows()); got != "status skip: pending 1 [5] false|type fee 1 [6] false" {
		t.Errorf("SkippedRows = %s", got)
	}
	for _, bad := range []string{"nokey", "colour=Farbe", "key="} {
		if err := l.ParseMap(bad); err == nil {
			t.Errorf("ParseMap(%q) accepted", bad)
		}
	}
	if err := l.ParseStatusMap("x=maybe"); err == nil {
		t.Error("unknown outcome accepted")
	}
	if _, err := csvprovider.Preset("paypal"); err == nil {
		t.Error("unknown preset accepted")
	}
	// The unmapped header is named, with the layout's expectation.
	_, err = csvprovider.ParseLayout(strings.NewReader("key,amount\n"), mustPreset(t, csvprovider.FormatStripeBalance))
	if err == nil || !strings.Contains(err.Error(), `line 1: the header has no column "idempotency_key (metadata)" or "payment_metadata[idempotency_key]" (for key)`) ||
		!strings.Contains(err.Error(), `"Created (UTC)" or "created_utc" (for applied_at)`) {
		t.Errorf("header error = %v", err)
	}
}

func TestRefundKeys(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"charge:v1:shop:o-1": "refund:v1:shop:o-1",
		"charge:v2:o%3A1":    "refund:v2:o%3A1",
		"refund:v1:o-1":      "refund:v1:o-1",
	} {
		if got, err := csvprovider.DefaultRefundKey(in); err != nil || got != want {
			t.Errorf("DefaultRefundKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"o-1", "charge:1:o", "charge:v:o", "charge:v1:", ":v1:o"} {
		if got, err := csvprovider.DefaultRefundKey(in); err == nil {
			t.Errorf("DefaultRefundKey(%q) = %q, want an error", in, got)
		}
	}
	rk, _ := csvprovider.RefundKeyTemplate("rf:v1:{order}")
	if got, err := rk("charge:v1:shop:o-9"); err != nil || got != "rf:v1:shop:o-9" {
		t.Errorf("template = %q, %v", got, err)
	}
	if _, err := csvprovider.RefundKeyTemplate("refund"); err == nil {
		t.Error("template without a placeholder accepted")
	}
}

// FuzzParseLayout feeds any file to every preset: it is refused with an
// error or read into entries that are whole (a key, a currency, a status)
// and found again by Lookup; nothing panics.
func FuzzParseLayout(f *testing.F) {
	for _, name := range []string{"../testdata/stripe-balance.csv", "../testdata/adyen-settlement.csv"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for i := range uint8(3) {
			f.Add(string(b), i)
		}
	}
	f.Add("id,Type,Source,Amount,Currency,Created (UTC),idempotency_key (metadata)\nt,refund,re,\"-1,0.0\",eur,2026-12-01 19:05,x:v1:y\n", uint8(1))
	f.Fuzz(func(t *testing.T, in string, preset uint8) {
		l := mustPreset(t, csvprovider.Formats[int(preset)%len(csvprovider.Formats)])
		p, err := csvprovider.ParseLayout(strings.NewReader(in), l)
		if err != nil {
			return
		}
		for a, err := range p.AppliedSince(context.Background(), time.Time{}) {
			if err != nil || a.Key == "" || len(a.Currency) != 3 || (a.Status != reconcile.StatusApplied && a.Status != reconcile.StatusFailed) {
				t.Fatalf("parsed entry %+v, %v", a, err)
			}
			if l.Magnitude && a.Amount < 0 {
				t.Fatalf("negative amount %d in a layout of magnitudes", a.Amount)
			}
			if got, err := p.Lookup(context.Background(), a.Key); err != nil || got.Amount != a.Amount {
				t.Fatalf("Lookup(%q) = %+v, %v", a.Key, got, err)
			}
		}
		for _, g := range p.SkippedRows() {
			if g.Reason == "" || g.Rows <= 0 || len(g.Lines) == 0 || len(g.Lines) > min(g.Rows, reconcile.MaxSkippedLines) {
				t.Fatalf("skipped rows %+v", g)
			}
		}
	})
}

// FuzzParseMaps feeds any flag value to --map and --status-map's parsers:
// they refuse it or apply exactly what it says, and the layout stays one
// that ParseLayout accepts or refuses without panicking.
func FuzzParseMaps(f *testing.F) {
	f.Add("key=idempotency_key (metadata)", "charge=applied,refund=skip")
	f.Add("amount=Gross Credit (GC)", "Settled=applied, Refunded=refund")
	f.Add("=", ",,=")
	f.Fuzz(func(t *testing.T, m, st string) {
		l := mustPreset(t, csvprovider.FormatStripeBalance)
		if err := l.ParseMap(m); err == nil {
			field, col, _ := strings.Cut(m, "=")
			if l.Columns[strings.TrimSpace(field)] != col {
				t.Fatalf("ParseMap(%q): column of %q = %q", m, field, l.Columns[strings.TrimSpace(field)])
			}
		}
		if err := l.ParseStatusMap(st); err == nil {
			want := map[string]string{} // the last pair for a value wins
			for pair := range strings.SplitSeq(st, ",") {
				v, o, _ := strings.Cut(pair, "=")
				want[strings.ToLower(strings.TrimSpace(v))] = strings.TrimSpace(o)
			}
			for v, o := range want {
				if got := l.Statuses[v]; string(got) != o {
					t.Fatalf("ParseStatusMap(%q): %q maps to %q, want %q", st, v, got, o)
				}
			}
		}
		_, _ = csvprovider.ParseLayout(strings.NewReader("a,b\n1,2\n"), l)
	})
}
