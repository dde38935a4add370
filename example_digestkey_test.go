package idem_test

import (
	"fmt"

	"github.com/idemkit/idem"
)

// Digests are stored keyed for the request's scope: one caller's record
// cannot be compared with another's, yet a mismatch in one scope still
// names the member that changed.
func ExampleDigestKey() {
	key, _ := idem.NewDigestKey([]byte("a secret every replica shares!!!"))
	_, first, _ := idem.FingerprintBody("POST", "/charges", []byte(`{"amount":50,"currency":"EUR"}`), true)
	_, changed, _ := idem.FingerprintBody("POST", "/charges", []byte(`{"amount":5000,"currency":"EUR"}`), true)

	alice, bob := key.Key("user:alice", first), key.Key("user:bob", first)
	fmt.Println(alice == bob, key.Key("", first) == "")
	fmt.Println(key.Diff(alice, "user:alice", changed))
	// Output:
	// false true
	// [amount]
}
