package idem_test

import (
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Two spellings of one request body canonicalise to the same bytes, so a
// client that re-serialises its retry still matches its fingerprint.
func ExampleCanonicalJSON() {
	first := []byte(`{"currency": "EUR", "amount": 50.0, "note": "caf\u00e9"}`)
	retry := []byte(`{"amount":5e1,"note":"café","currency":"EUR"}`)

	a, _ := idem.CanonicalJSON(first)
	b, _ := idem.CanonicalJSON(retry)
	fmt.Printf("%s\n%s\n", a, b)

	// Numbers are exact: no rounding through float64.
	big, _ := idem.CanonicalJSON([]byte(`[9007199254740993, 1e21, 0.10]`))
	fmt.Printf("%s\n", big)

	// Duplicate members have no single meaning and are refused.
	_, err := idem.CanonicalJSON([]byte(`{"amount":50,"amount":5000}`))
	fmt.Println(errors.Is(err, idem.ErrDuplicateMember), errors.Is(err, idem.ErrInvalidJSON))
	// Output:
	// {"amount":50,"currency":"EUR","note":"café"}
	// {"amount":50,"currency":"EUR","note":"café"}
	// [9007199254740993,1e+21,0.1]
	// true true
}

// FingerprintBody hashes a request once for both what decides a retry (the
// fingerprint) and what names the members a client changed (the digests).
func ExampleFingerprintBody() {
	fp, first, _ := idem.FingerprintBody("POST", "/charges", []byte(`{"amount":50,"currency":"EUR"}`), true)
	fp2, retry, _ := idem.FingerprintBody("POST", "/charges", []byte(`{ "currency":"EUR", "amount":5e1 }`), true)
	fmt.Println(fp == fp2, first.Len())

	_, changed, _ := idem.FingerprintBody("POST", "/charges", []byte(`{"amount":5000,"currency":"EUR"}`), true)
	fmt.Println(first.Diff(retry), first.Diff(changed))
	// Output:
	// true 2
	// [] [amount]
}
