package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

// A charge whose response was lost is recorded unknown, and a retry does
// not run it again. The recovery hook asks the provider (here its
// settlement file) whether it applied the forwarded key; it did, so the
// record becomes succeeded and the retry replays the provider's entry.
func ExampleRecoverer() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()

	ctx := context.Background()
	req := idem.Request{Scope: "shop", Key: "order-123", Operation: "charge",
		Intent: &idem.Intent{Operation: "charge", Amount: 1250, Currency: "EUR", ForwardKey: "charge:v1:order-123"}}
	_, err = engine.DoBytes(ctx, req, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		// The charge went out under a.ForwardKey(), but the answer never came.
		return nil, idem.Unknown(errors.New("provider timed out"))
	})
	fmt.Println(errors.Is(err, idem.ErrUnknownOutcome))

	settlement, err := csvprovider.Parse(strings.NewReader(`key,amount,currency,status,applied_at
charge:v1:order-123,1250,EUR,applied,2025-03-01T12:00:00Z
`))
	if err != nil {
		log.Fatal(err)
	}
	recoverer, err := reconcile.NewRecoverer(engine, reconcile.RecovererConfig{
		Hooks: map[string]reconcile.Hook{"charge": {Provider: settlement}},
	})
	if err != nil {
		log.Fatal(err)
	}
	decisions, err := recoverer.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(decisions)

	res, err := engine.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
		panic("not called: the charge is already decided")
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Replayed, string(res.Value))
	// Output:
	// true
	// map[applied:1]
	// true {"key":"charge:v1:order-123","amount":1250,"currency":"EUR","status":"applied","applied_at":"2025-03-01T12:00:00Z"}
}
