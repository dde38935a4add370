package csvprovider_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

// A settlement file answers lookups by forwarded key: applied entries with
// their amount, declined ones as failed, and keys it does not hold as
// reconcile.ErrNotApplied.
func ExampleParse() {
	p, err := csvprovider.Parse(strings.NewReader(`key,amount,currency,status,applied_at,fee
charge:v1:order-1,1250,EUR,applied,2025-03-01T12:00:00Z,30
charge:v1:order-2,990,eur,declined,2025-03-01T12:01:30Z,0
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"charge:v1:order-1", "charge:v1:order-2", "charge:v1:order-3"} {
		a, err := p.Lookup(ctx, key)
		if errors.Is(err, reconcile.ErrNotApplied) {
			fmt.Println(key, "not applied")
			continue
		}
		fmt.Println(key, a.Status, a.Amount, a.Currency)
	}
	// A malformed row is an error naming its line, never skipped.
	_, err = csvprovider.Parse(strings.NewReader("key,amount,currency,status,applied_at\nk,12.50,EUR,applied,2025-03-01T12:00:00Z\n"))
	fmt.Println(err != nil)
	// Output:
	// charge:v1:order-1 applied 1250 EUR
	// charge:v1:order-2 failed 990 EUR
	// charge:v1:order-3 not applied
	// true
}
