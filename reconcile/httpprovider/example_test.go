package httpprovider_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/httpprovider"
)

// The provider's lookup endpoint answers one key per GET: 200 with the
// entry, 404 when it never applied the key, anything else when it cannot
// tell now.
func ExampleNew() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/charges/charge:v1:order-1":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"key":"charge:v1:order-1","amount":1250,"currency":"EUR","status":"succeeded","applied_at":"2025-03-01T12:00:00Z"}`)
		case "/v1/charges/charge:v1:order-3":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()

	p, err := httpprovider.New(httpprovider.Config{URLTemplate: api.URL + "/v1/charges/{key}",
		Header: http.Header{"Authorization": {"Bearer test-token"}}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	a, err := p.Lookup(ctx, "charge:v1:order-1")
	fmt.Println(a.Status, a.Amount, a.Currency, err)
	_, err = p.Lookup(ctx, "charge:v1:order-2")
	fmt.Println(errors.Is(err, reconcile.ErrNotApplied))
	_, err = p.Lookup(ctx, "charge:v1:order-3")
	fmt.Println(err)
	// Output:
	// applied 1250 EUR <nil>
	// true
	// httpprovider: lookup answered 503
}
