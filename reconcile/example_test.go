package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

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

// A reconciliation run compares every local record with the provider's
// settlement file by forwarded key. Here one charge agrees, one was
// settled for another amount (drift), and the provider applied a key
// that has no local record (recorded now, as under-counted).
func ExampleReconciler_RunOnce() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	ctx := context.Background()
	for key, amount := range map[string]int64{"order-1": 1000, "order-2": 2500} {
		_, err := engine.DoBytes(ctx, idem.Request{Scope: "shop", Key: idem.Key(key),
			Intent: &idem.Intent{Operation: "charge", Amount: amount, Currency: "EUR", ForwardKey: "charge:v1:" + key}},
			func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("charged"), nil })
		if err != nil {
			log.Fatal(err)
		}
	}
	applied := time.Now().UTC().Format(time.RFC3339)
	settlement, err := csvprovider.Parse(strings.NewReader("key,amount,currency,status,applied_at,scope\n" +
		"charge:v1:order-1,1000,EUR,applied," + applied + ",shop\n" +
		"charge:v1:order-2,2400,EUR,applied," + applied + ",shop\n" +
		"charge:v1:order-9,700,EUR,applied," + applied + ",shop\n"))
	if err != nil {
		log.Fatal(err)
	}
	r, err := reconcile.New(engine, settlement, reconcile.Config{SettlementWindow: 48 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := r.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range []reconcile.Class{reconcile.ClassReconciled, reconcile.ClassDrift, reconcile.ClassUnderCounted} {
		fmt.Println(c, rep.Keys[c])
	}
	fmt.Println("drift:", rep.DriftAmount, "clean:", rep.Clean())
	// Output:
	// reconciled [order-1]
	// drift [order-2]
	// under_counted [charge:v1:order-9]
	// drift: map[EUR:100] clean: false
}
