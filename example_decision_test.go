package idem_test

import (
	"fmt"

	"github.com/idemkit/idem"
)

// A decider (reconciliation, an operator's tool) writes a decision in the
// form the record's adapter replays: here a record made by an engine
// caller, whose retries get the application's value.
func ExampleEncodeDecision() {
	rec := &idem.Record{Scope: "shop", Key: "charge:v1:o-42"} // no intent origin: made by idem.Do
	b, err := idem.EncodeDecision(rec, idem.Decision{As: idem.StateSucceeded, Body: []byte(`{"charge":"ch_1R9x"}`)})
	fmt.Println(string(b), err)
	b, err = idem.EncodeDecision(rec, idem.Decision{As: idem.StateFailed, Message: "provider never applied the request"})
	fmt.Println(string(b), err)
	// Output:
	// {"charge":"ch_1R9x"} <nil>
	// provider never applied the request <nil>
}
