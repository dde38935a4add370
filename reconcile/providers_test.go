package reconcile_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
	"github.com/idemkit/idem/reconcile/money"
)

// The files in testdata/providers are a month of a shop's settlements in
// the providers' own layouts (testdata/providers/README.md says where each
// column comes from), written by genMonth from a fixed seed: charges in
// seven currencies, partial refunds, fees, payouts, adjustments, disputes,
// sales made outside idem, refunds of keys idem did not make — and the
// planted findings below. go test -run TestProviderFiles -fixtures
// rewrites them.
var fixtures = flag.Bool("fixtures", false, "rewrite testdata/providers from the generator")

// month is the scenario's period and the moment it is reconciled.
var (
	monthStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	monthNow   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// localKind is what the shop's store holds for an order's charge.
type localKind int

const (
	localOK      localKind = iota // succeeded, as the provider says
	localUnknown                  // the process crashed after the call
	localNone                     // no local record (a key idem made elsewhere, or lost)
)

// order is one charge of the scenario, and what each side did with it.
type order struct {
	n         int
	cur       string
	exp       int   // the provider's digits for cur
	minor     int64 // the intent's amount, in the provider's minor units
	at        time.Time
	local     localKind
	charged   bool  // the provider has the charge
	settled   int64 // what the provider charged (drift when it differs)
	twice     bool  // the provider lists the charge twice
	refund    int64 // a partial refund, 0 for none
	refundAt  time.Time
	refundOut bool // the refund was made outside idem (a Dashboard refund of a legacy key)
	key       string
}

func (o order) fk() string {
	return string(idem.MustDeriveKey("charge", 1, "shop", fmt.Sprintf("o-%05d", o.n)))
}

// planted findings, by order number.
var planted = struct{ drift, overCounted, underCounted, notApplied, twice map[int]bool }{
	drift:        map[int]bool{41: true, 407: true},
	overCounted:  map[int]bool{77: true, 612: true},
	underCounted: map[int]bool{150: true, 151: true, 733: true},
	notApplied:   map[int]bool{290: true},
	twice:        map[int]bool{555: true},
}

const monthOrders = 900

// genMonth is the scenario: monthOrders charges over November 2026.
func genMonth() []order {
	rng := rand.New(rand.NewPCG(33, 2026))
	curs := []string{"EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "USD", "USD", "GBP", "JPY", "KWD", "COP", "ISK"}
	var out []order
	for n := 1; n <= monthOrders; n++ {
		cur := curs[rng.IntN(len(curs))]
		exp, _ := money.Exponent(cur)
		if cur == "ISK" {
			exp = 2 // both providers' APIs count ISK in hundredths
		}
		major := int64(5 + rng.IntN(400))
		switch cur {
		case "JPY", "ISK":
			major *= 150
		case "COP":
			major *= 4000
		}
		minor := major*pow10(exp) + int64(rng.IntN(int(pow10(exp))))
		if cur == "ISK" || cur == "KWD" {
			minor -= minor % 10 // whole króna; KWD rounded to ten fils, as Stripe asks
		}
		if cur == "ISK" {
			minor -= minor % 100
		}
		o := order{n: n, cur: cur, exp: exp, minor: minor, at: monthStart.Add(time.Duration(n) * 44 * time.Minute), charged: true, settled: minor}
		o.key = o.fk()
		switch {
		case planted.drift[n]:
			o.settled = minor + pow10(exp)
		case planted.overCounted[n]:
			o.charged = false
		case planted.underCounted[n]:
			o.local = localUnknown
		case planted.notApplied[n]:
			o.local, o.charged = localUnknown, false
		case planted.twice[n]:
			o.twice = true
		}
		if o.charged && rng.IntN(100) < 15 {
			o.refund = max(1, o.minor/int64(2+rng.IntN(3)))
			if cur == "ISK" {
				o.refund -= o.refund % 100
			}
			if cur == "KWD" {
				o.refund -= o.refund % 10
			}
			o.refundAt = o.at.Add(time.Duration(1+rng.IntN(72)) * time.Hour)
		}
		out = append(out, o)
	}
	return out
}

func pow10(e int) int64 {
	n := int64(1)
	for range e {
		n *= 10
	}
	return n
}

// outsideKeys are keys another integration wrote into the metadata column
// before the shop used idem: their charges have no local record, their
// refunds no refund key idem can derive.
var outsideKeys = []string{"legacy-88121", "legacy-88130", "legacy-88177"}

// seedMonth writes the shop's side of the scenario into a new store.
func seedMonth(t *testing.T, orders []order) idem.Store {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	var now time.Time
	eng, err := idem.New(st, idem.Config{Clock: func() time.Time { return now }, TTL: 3650 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	do := func(op string, o order, amount int64, at time.Time, unknown bool) {
		now = at.Add(-2 * time.Second)
		fk := string(idem.MustDeriveKey(op, 1, "shop", fmt.Sprintf("o-%05d", o.n)))
		_, err := eng.DoBytes(ctx, idem.Request{Scope: "shop", Key: idem.Key(op + "-" + fmt.Sprintf("o-%05d", o.n)), Operation: op,
			Intent: &idem.Intent{Operation: op, Amount: amount, Currency: o.cur, ForwardKey: fk}},
			func(context.Context, *idem.Attempt) ([]byte, error) {
				if unknown {
					return nil, idem.Unknown(errors.New("provider timed out"))
				}
				return []byte(`{"ok":true}`), nil
			})
		if err != nil && !unknown {
			t.Fatal(err)
		}
	}
	for _, o := range orders {
		if o.local == localNone {
			continue
		}
		do("charge", o, o.minor, o.at, o.local == localUnknown)
		if o.refund > 0 && !o.refundOut {
			do("refund", o, o.refund, o.refundAt, false)
		}
	}
	return st
}

// row is one line of a provider file before it is laid out.
type row struct {
	at        time.Time
	kind      string // charge, refund, fee, payout, adjustment, dispute
	key       string
	cur       string
	exp       int
	gross     int64 // signed, minor units
	fee       int64
	ref, desc string
}

// monthRows lays the scenario out as the provider's rows, in time order.
func monthRows(orders []order) []row {
	rng := rand.New(rand.NewPCG(4217, 33))
	var rows []row
	fee := func(g int64) int64 { return g*14/1000 + 25 }
	for _, o := range orders {
		if o.charged {
			rows = append(rows, row{at: o.at, kind: "charge", key: o.key, cur: o.cur, exp: o.exp, gross: o.settled, fee: fee(o.settled),
				ref: fmt.Sprintf("ch_3Qm%08dAbc", o.n), desc: fmt.Sprintf("Order o-%05d", o.n)})
			if o.twice {
				rows = append(rows, row{at: o.at.Add(3 * time.Second), kind: "charge", key: o.key, cur: o.cur, exp: o.exp, gross: o.settled,
					fee: fee(o.settled), ref: fmt.Sprintf("ch_3Qm%08dDup", o.n), desc: fmt.Sprintf("Order o-%05d", o.n)})
			}
		}
		if o.refund > 0 {
			rows = append(rows, row{at: o.refundAt, kind: "refund", key: o.key, cur: o.cur, exp: o.exp, gross: -o.refund,
				ref: fmt.Sprintf("re_3Qm%08dRfd", o.n), desc: "REFUND FOR CHARGE (Order " + fmt.Sprintf("o-%05d", o.n) + ")"})
		}
	}
	// Sales made outside idem (point of sale, invoices paid by link): no key.
	for i := range 45 {
		at := monthStart.Add(time.Duration(3+i*15)*time.Hour + time.Duration(rng.IntN(3600))*time.Second)
		g := int64(500 + rng.IntN(9000))
		rows = append(rows, row{at: at, kind: "charge", cur: "EUR", exp: 2, gross: g, fee: fee(g), ref: fmt.Sprintf("ch_3Qp%08dPos", i), desc: "Point-of-sale sale"})
	}
	// Keys another integration made: charges, and Dashboard refunds of them.
	for i, k := range outsideKeys {
		at := monthStart.Add(time.Duration(50+i*200) * time.Hour)
		rows = append(rows, row{at: at, kind: "charge", key: k, cur: "EUR", exp: 2, gross: 4900, fee: fee(4900), ref: fmt.Sprintf("ch_3Ql%08dLeg", i), desc: "Legacy order"},
			row{at: at.Add(26 * time.Hour), kind: "refund", key: k, cur: "EUR", exp: 2, gross: -4900, ref: fmt.Sprintf("re_3Ql%08dLeg", i), desc: "Dashboard refund"})
	}
	// The provider's own bookings: daily fees, payouts, a few adjustments
	// and disputes.
	for d := range 30 {
		day := monthStart.Add(time.Duration(d) * 24 * time.Hour)
		rows = append(rows, row{at: day.Add(23*time.Hour + 59*time.Minute), kind: "fee", cur: "EUR", exp: 2, gross: -int64(150 + rng.IntN(200)), desc: "Billing - Usage Fee"})
		if d%2 == 1 {
			rows = append(rows, row{at: day.Add(6 * time.Hour), kind: "payout", cur: "EUR", exp: 2, gross: -int64(250000 + rng.IntN(90000)),
				ref: fmt.Sprintf("po_1Qx%08d", d), desc: "STRIPE PAYOUT"})
		}
		if d%9 == 4 {
			rows = append(rows, row{at: day.Add(15 * time.Hour), kind: "adjustment", cur: "EUR", exp: 2, gross: -1500, ref: fmt.Sprintf("du_1Qd%08d", d), desc: "Dispute fee adjustment"})
		}
		if d%11 == 7 {
			rows = append(rows, row{at: day.Add(10 * time.Hour), kind: "dispute", cur: "EUR", exp: 2, gross: -int64(2000 + rng.IntN(5000)), ref: fmt.Sprintf("dp_1Qd%08d", d), desc: "Chargeback withdrawal"})
		}
	}
	sortRows(rows)
	return rows
}

func sortRows(rows []row) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rows[j].at.Before(rows[j-1].at); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

// major writes minor units as the provider's decimal major amount.
func major(n int64, exp int, grouped bool) string {
	s := money.MajorString(n, exp)
	if !grouped {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	for i := len(intPart) - 3; i > 0; i -= 3 {
		intPart = intPart[:i] + "," + intPart[i:]
	}
	if frac != "" {
		intPart += "." + frac
	}
	if neg {
		return "-" + intPart
	}
	return intPart
}

// stripeType is the row's Type in the Dashboard export, and its
// reporting_category in the Report API's reports.
func stripeType(r row) (typ, category string) {
	switch r.kind {
	case "fee":
		return "stripe_fee", "fee"
	case "dispute":
		return "adjustment", "dispute"
	case "adjustment":
		return "adjustment", "other_adjustment"
	}
	return r.kind, r.kind
}

func writeCSV(t *testing.T, header []string, records [][]string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(header); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(records); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stripeDashboard is the Dashboard's balance export (Balance → Export),
// with the metadata column the shop asked for.
func stripeDashboard(t *testing.T, rows []row) []byte {
	header := []string{"id", "Type", "Source", "Amount", "Fee", "Destination Platform Fee", "Destination Platform Fee Currency", "Net",
		"Currency", "Created (UTC)", "Available On (UTC)", "Description", "Customer Facing Amount", "Customer Facing Currency",
		"Transfer", "Transfer Date (UTC)", "Transfer Group", "idempotency_key (metadata)"}
	var recs [][]string
	for i, r := range rows {
		typ, _ := stripeType(r)
		cf, cfc := "", ""
		if r.kind == "charge" || r.kind == "refund" {
			cf, cfc = major(r.gross, r.exp, true), strings.ToLower(r.cur)
		}
		recs = append(recs, []string{fmt.Sprintf("txn_1Qz%08dKp", i), typ, r.ref, major(r.gross, r.exp, true), major(r.fee, r.exp, true), "", "",
			major(r.gross-r.fee, r.exp, true), strings.ToLower(r.cur), r.at.Format("2006-01-02 15:04"),
			r.at.Add(48*time.Hour).Format("2006-01-02") + " 00:00", r.desc, cf, cfc, "", "", "", r.key})
	}
	return writeCSV(t, header, recs)
}

// stripeItemized is the Report API's itemized balance change report
// (balance_change_from_activity.itemized.3), or with payouts the itemized
// payout reconciliation report (payout_reconciliation.itemized.5): the
// same balance transactions, payouts themselves left out, each with the
// automatic payout that settled it.
func stripeItemized(t *testing.T, rows []row, payouts bool) []byte {
	header := []string{"balance_transaction_id", "created_utc", "created", "available_on_utc", "available_on", "currency", "gross", "fee", "net",
		"reporting_category", "source_id", "description", "customer_facing_amount", "customer_facing_currency", "automatic_payout_id",
		"automatic_payout_effective_at_utc", "charge_id", "payment_intent_id", "payment_method_type", "card_brand",
		"payment_metadata[idempotency_key]", "payment_metadata[order_id]"}
	if payouts {
		header = append([]string{"automatic_payout_id", "automatic_payout_effective_at"}, header[:14]...)
		header = append(header, "charge_id", "payment_intent_id", "payment_method_type", "card_brand",
			"payment_metadata[idempotency_key]", "payment_metadata[order_id]")
	}
	var recs [][]string
	for i, r := range rows {
		_, cat := stripeType(r)
		if r.kind == "payout" {
			continue
		}
		payout := r.at.Truncate(48 * time.Hour).Add(72*time.Hour + 6*time.Hour)
		if payouts && payout.After(monthNow) {
			continue // not paid out yet: in the ending balance, not in a payout
		}
		pid := "po_1Qx" + payout.Format("20060102")
		cf, cfc, charge, pi, pm, brand, order := "", "", "", "", "", "", ""
		if r.kind == "charge" || r.kind == "refund" {
			cf, cfc = money.MajorString(r.gross, r.exp), strings.ToLower(r.cur)
			charge, pi, pm, brand = strings.Replace(r.ref, "re_", "ch_", 1), strings.Replace(strings.Replace(r.ref, "re_", "pi_", 1), "ch_", "pi_", 1), "card", "visa"
			if strings.HasPrefix(r.key, "charge:v1:shop:") {
				order = strings.TrimPrefix(r.key, "charge:v1:shop:")
			}
		}
		created := r.at.Format(time.DateTime)
		avail := r.at.Add(48*time.Hour).Format("2006-01-02") + " 00:00:00"
		rec := []string{fmt.Sprintf("txn_1Qz%08dKp", i), created, created, avail, avail, strings.ToLower(r.cur), money.MajorString(r.gross, r.exp),
			money.MajorString(r.fee, r.exp), money.MajorString(r.gross-r.fee, r.exp), cat, r.ref, r.desc, cf, cfc}
		if payouts {
			rec = append([]string{pid, payout.Format(time.DateTime)}, rec...)
		} else {
			rec = append(rec, pid, payout.Format(time.DateTime))
		}
		recs = append(recs, append(rec, charge, pi, pm, brand, r.key, order))
	}
	return writeCSV(t, header, recs)
}

// adyenSettlement is the Settlement details report of the month's
// batches, the account's time zone CET.
func adyenSettlement(t *testing.T, rows []row) []byte {
	header := []string{"Company Account", "Merchant Account", "Psp Reference", "Merchant Reference", "Payment Method", "Creation Date", "TimeZone",
		"Type", "Modification Reference", "Gross Currency", "Gross Debit (GC)", "Gross Credit (GC)", "Exchange Rate", "Net Currency",
		"Net Debit (NC)", "Net Credit (NC)", "Commission (NC)", "Markup (NC)", "Scheme Fees (NC)", "Interchange (NC)",
		"Payment Method Variant", "Modification Merchant Reference", "Batch Number"}
	cet := time.FixedZone("CET", 3600)
	var recs [][]string
	for i, r := range rows {
		batch := fmt.Sprint(400 + int(r.at.Sub(monthStart)/(7*24*time.Hour)))
		at := r.at.In(cet).Format(time.DateTime)
		psp := fmt.Sprintf("88150011%08d", i)
		amt := major(abs64(r.gross), r.exp, false)
		net := major(abs64(r.gross)-r.fee, r.exp, false)
		var rec []string
		switch r.kind {
		case "charge":
			rec = []string{psp, r.key, "visa", at, "CET", "Settled", fmt.Sprintf("88150012%08d", i), r.cur, "", amt, "1", r.cur, "", net,
				"", major(r.fee/4, r.exp, false), major(r.fee/4, r.exp, false), major(r.fee/2, r.exp, false), "visaclassic", ""}
		case "refund":
			rec = []string{psp, r.key, "visa", at, "CET", "Refunded", fmt.Sprintf("88150013%08d", i), r.cur, amt, "", "1", r.cur, amt, "",
				"", "", "", "", "visaclassic", "refund-" + strings.TrimPrefix(r.key, "charge:v1:shop:")}
		case "fee":
			rec = []string{"", "", "", at, "CET", "Fee", "Transaction Fees " + r.at.Format("2006-01-02"), "EUR", "", "", "", "EUR", amt, "", "", "", "", "", "", ""}
		case "payout":
			rec = []string{"", "", "", at, "CET", "MerchantPayout", "TX" + psp + "XT batch " + batch, "EUR", "", "", "", "EUR", amt, "", "", "", "", "", "", ""}
		case "adjustment":
			rec = []string{"", "", "", at, "CET", "InvoiceDeduction", "Invoice " + r.ref, "EUR", "", "", "", "EUR", amt, "", "", "", "", "", "", ""}
		case "dispute":
			rec = []string{psp, "", "mc", at, "CET", "Chargeback", fmt.Sprintf("88150014%08d", i), r.cur, amt, "", "1", r.cur, amt, "", "", "", "", "", "mccredit", ""}
		}
		recs = append(recs, append(append([]string{"ExampleCo", "ExampleShopEU"}, rec...), batch))
	}
	return writeCSV(t, header, recs)
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// providerFile is one committed file, how it is written and read.
type providerFile struct {
	name, format string
	write        func(*testing.T, []row) []byte
}

var providerFiles = []providerFile{
	{"stripe-dashboard-balance-export.csv", csvprovider.FormatStripeBalance, stripeDashboard},
	{"balance_change_from_activity.itemized.3.csv", csvprovider.FormatStripeBalance, func(t *testing.T, r []row) []byte { return stripeItemized(t, r, false) }},
	{"payout_reconciliation.itemized.5.csv", csvprovider.FormatStripeBalance, func(t *testing.T, r []row) []byte { return stripeItemized(t, r, true) }},
	{"adyen-settlement-details.csv", csvprovider.FormatAdyenSettlement, adyenSettlement},
}

// TestProviderFiles reconciles the shop's month against each provider
// file: every charge and refund idem made matches, exactly the planted
// findings are found, and every other row is listed by reason with its
// count — none is dropped, none aborts the run.
func TestProviderFiles(t *testing.T) {
	t.Parallel()
	orders := genMonth()
	rows := monthRows(orders)
	for _, pf := range providerFiles {
		t.Run(pf.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "providers", pf.name)
			want := pf.write(t, rows)
			if *fixtures {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is not what the generator writes (go test -run TestProviderFiles -fixtures)", path)
			}
			lines := bytes.Count(got, []byte("\n")) - 1
			if lines < 1000 {
				t.Fatalf("%s has %d rows; want 1000 or more", path, lines)
			}
			st := seedMonth(t, orders)
			rep := runOn(t, st, provider(t, path, pf.format), 3650*24*time.Hour, monthNow,
				reconcile.Config{SettlementWindow: 24 * time.Hour, Lookback: 60 * 24 * time.Hour, OrphanScope: "shop"})
			t.Logf("%s: %d rows; counts %v; skipped %s", pf.name, lines, rep.Counts, skippedSummary(rep))
			checkMonth(t, pf, orders, rows, rep)
		})
	}
}

func skippedSummary(rep *reconcile.Report) string {
	var parts []string
	for _, g := range rep.SkippedRows {
		parts = append(parts, fmt.Sprintf("%s: %d", g.Reason, g.Rows))
	}
	return strings.Join(parts, "; ")
}

// checkMonth compares the report with what the scenario planted.
func checkMonth(t *testing.T, pf providerFile, orders []order, rows []row, rep *reconcile.Report) {
	t.Helper()
	if len(rep.Errors) > 0 || rep.Error != "" {
		t.Fatalf("errors: %v %s", rep.Errors, rep.Error)
	}
	payouts := pf.name == "payout_reconciliation.itemized.5.csv"
	inFile := func(at time.Time) bool {
		return !payouts || !at.Truncate(48*time.Hour).Add(78*time.Hour).After(monthNow)
	}
	var reconciled, over, refunds int
	for _, o := range orders {
		switch {
		case planted.overCounted[o.n], planted.drift[o.n], planted.twice[o.n], o.local != localOK:
		case !inFile(o.at):
			over++ // a charge not yet paid out is missing from the payout report
		default:
			reconciled++
		}
		if o.refund > 0 && o.local == localOK {
			if inFile(o.refundAt) {
				refunds++
			} else {
				over++
			}
		}
	}
	over += len(planted.overCounted)
	want := map[reconcile.Class]int{
		reconcile.ClassReconciled:   reconciled + refunds,
		reconcile.ClassDrift:        len(planted.drift),
		reconcile.ClassOverCounted:  over,
		reconcile.ClassUnderCounted: len(planted.underCounted) + len(outsideKeys),
		reconcile.ClassDuplicate:    len(planted.twice),
		reconcile.ClassNotApplied:   len(planted.notApplied),
	}
	for c, n := range want {
		if rep.Counts[c] != n {
			t.Errorf("%s: %d keys, want %d", c, rep.Counts[c], n)
		}
	}
	// Every row is accounted for: compared, or listed by reason.
	var skipped int
	for _, g := range rep.SkippedRows {
		skipped += g.Rows
		if g.Unchecked != (g.Reason == "refund of a key not in idem's form (see --refund-key)") {
			t.Errorf("skipped rows %q: unchecked %v", g.Reason, g.Unchecked)
		}
	}
	if g := group(rep, "refund of a key not in idem's form (see --refund-key)"); g.Rows != len(outsideKeys) && !payouts {
		t.Errorf("refunds of outside keys: %+v", g)
	}
	if g := group(rep, "no key"); g.Rows < 40 {
		t.Errorf("sales made outside idem: %+v", g)
	}
	if rep.Complete() || !strings.Contains(verdictOf(t, rep), "UNCHECKED") || !strings.Contains(verdictOf(t, rep), "FOUND 2 drift") {
		t.Errorf("verdict %q", verdictOf(t, rep))
	}
}

func verdictOf(t *testing.T, rep *reconcile.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := reconcile.WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	return s[strings.LastIndex(s, "result: "):]
}
