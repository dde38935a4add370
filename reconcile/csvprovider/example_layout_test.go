package csvprovider_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/idemkit/idem/reconcile/csvprovider"
)

// A Stripe balance export is read as it is: major units by the currency's
// digits, the key from a metadata column, the refund matched to the refund
// key of the same order, and the payout counted as skipped.
func ExampleParseLayout() {
	l, err := csvprovider.Preset(csvprovider.FormatStripeBalance)
	if err != nil {
		log.Fatal(err)
	}
	p, err := csvprovider.ParseLayout(strings.NewReader(`id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,idempotency_key (metadata)
txn_1,charge,ch_1,12.50,0.61,11.89,eur,2026-12-01 19:05:02,Order 1,charge:v1:shop:o-1
txn_2,charge,ch_2,5000,190,4810,jpy,2026-12-01 19:06:00,Order 2,charge:v1:shop:o-2
txn_3,refund,re_1,-5.00,0.00,-5.00,eur,2026-12-01 20:00:00,Refund,charge:v1:shop:o-1
txn_4,payout,po_1,-12.39,0.00,-12.39,eur,2026-12-02 00:00:00,STRIPE PAYOUT,
`), l)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"charge:v1:shop:o-1", "charge:v1:shop:o-2", "refund:v1:shop:o-1"} {
		a, _ := p.Lookup(context.Background(), k)
		fmt.Println(k, a.Amount, a.Currency, a.Reference, a.AppliedAt.Format("15:04:05Z07:00"))
	}
	for _, g := range p.SkippedRows() {
		fmt.Printf("skipped: %s, %d row (line %v)\n", g.Reason, g.Rows, g.Lines)
	}
	// Output:
	// charge:v1:shop:o-1 1250 EUR ch_1 19:05:02Z
	// charge:v1:shop:o-2 5000 JPY ch_2 19:06:00Z
	// refund:v1:shop:o-1 500 EUR re_1 20:00:00Z
	// skipped: type payout, 1 row (line [5])
}
