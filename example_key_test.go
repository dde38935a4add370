package idem_test

import (
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// A key derived from an upstream event's identity. The separator inside a
// part is escaped, so ("a:b", "c") and ("a", "b:c") stay different keys.
func ExampleDeriveKey() {
	k, err := idem.DeriveKey("charge", 1, "order-123", "attempt-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(k)

	a, _ := idem.DeriveKey("job", 1, "a:b", "c")
	b, _ := idem.DeriveKey("job", 1, "a", "b:c")
	fmt.Println(a)
	fmt.Println(b)

	_, err = idem.DeriveKey("charge", 1, "order-123", "")
	fmt.Println(errors.Is(err, idem.ErrInvalidKey))
	// Output:
	// charge:v1:order-123:attempt-1
	// job:v1:a%3Ab:c
	// job:v1:a:b%3Ac
	// true
}
