package money_test

import (
	"fmt"

	"github.com/idemkit/idem/reconcile/money"
)

// Major-unit amounts become minor units by the currency's digits, exactly.
func ExampleFormat_Parse() {
	f := money.Format{Unit: money.Major, Thousands: ','}
	for _, c := range []struct{ amount, cur string }{{"1,250.00", "EUR"}, {"5000", "JPY"}, {"12.345", "KWD"}, {"-5.00", "EUR"}} {
		exp, _ := money.Exponent(c.cur)
		n, err := f.Parse(c.amount, exp)
		fmt.Println(c.amount, c.cur, "→", n, err)
	}
	_, err := f.Parse("12.505", 2)
	fmt.Println(err)
	// Output:
	// 1,250.00 EUR → 125000 <nil>
	// 5000 JPY → 5000 <nil>
	// 12.345 KWD → 12345 <nil>
	// -5.00 EUR → -500 <nil>
	// "12.505" has more than 2 decimals
}
