// Package pay is a fixture for idemvet.Main.
package pay

import (
	"math/rand"
	"net/http"
	"strconv"
)

// Send retries with a new key on every attempt.
func Send(r *http.Request) {
	r.Header.Set("Idempotency-Key", strconv.Itoa(rand.Int()))
}

// Trace sets a random key on a request that is never retried.
func Trace(r *http.Request) {
	//idem:ignore keyentropy a one-shot trace request, never retried
	r.Header.Set("Idempotency-Key", strconv.Itoa(rand.Int()))
}
