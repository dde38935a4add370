package reconcile_test

import (
	"fmt"
	"log"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/reconcile"
)

// AppliedDecision is what a record made by an adapter replays once
// reconciliation found that the provider applied it; over HTTP, a 200
// naming the provider's entry.
func ExampleAppliedDecision() {
	d := reconcile.AppliedDecision(reconcile.Applied{Key: "charge:v1:shop:o-42", Reference: "ch_1R9x", Amount: 1250,
		Currency: "EUR", Status: reconcile.StatusApplied, AppliedAt: time.Date(2026, 12, 1, 19, 5, 2, 0, time.UTC)})
	rec := &idem.Record{Key: "charge:v1:shop:o-42", Intent: []byte(`{"origin":"http"}`)}
	b, err := idem.EncodeDecision(rec, d)
	if err != nil {
		log.Fatal(err)
	}
	rr, _ := idemhttp.DecodeResponse(b)
	fmt.Println(rr.Status, rr.Header.Get("Content-Type"))
	fmt.Println(string(rr.Body))
	// Output:
	// 200 application/json
	// {"object":"idem.resolution","status":"applied","forward_key":"charge:v1:shop:o-42","reference":"ch_1R9x","amount":1250,"currency":"EUR","applied_at":"2026-12-01T19:05:02Z"}
}
