package idemhttp_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// Config.Intent puts the body's amount and currency in the intent journal,
// so that reconciliation compares them with the provider's settlement.
func ExampleConfig_intent() {
	st := memstore.New()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
		Intent: func(_ *http.Request, body []byte, in *idem.Intent) {
			var b struct {
				Amount   int64  `json:"amount"`
				Currency string `json:"currency"`
			}
			if json.Unmarshal(body, &b) == nil {
				in.Amount, in.Currency = b.Amount, strings.ToUpper(b.Currency)
			}
		}})
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":1250,"currency":"eur"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"order-42"`)
	h.ServeHTTP(httptest.NewRecorder(), req)

	rec, _ := st.Get(req.Context(), "", "order-42")
	in, _ := idem.DecodeIntent(rec.Intent)
	fmt.Println(in.Amount, in.Currency, in.Origin, idemhttp.MadeRecord(rec))
	// Output: 1250 EUR http true
}

// EncodeDecision is what a decision taken outside the request path
// (reconciliation, idem resolve) stores on a record the middleware made,
// so retries replay a response; idem.EncodeDecision picks it by the
// record's origin.
func ExampleEncodeDecision() {
	b, err := idemhttp.EncodeDecision(idem.Decision{As: idem.StateSucceeded, Body: []byte(`{"status":"applied","reference":"ch_1"}`)})
	if err != nil {
		log.Fatal(err)
	}
	rr, _ := idemhttp.DecodeResponse(b)
	fmt.Println(rr.Status, rr.Header.Get("Content-Type"), string(rr.Body))
	// Output: 200 application/json {"status":"applied","reference":"ch_1"}
}
