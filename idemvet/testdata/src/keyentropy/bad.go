package keyentropy

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	gofrs "github.com/gofrs/uuid"
	"github.com/google/uuid"
	"github.com/idemkit/idem"
	stripe "github.com/stripe/stripe-go/v76"
)

func uuidKey() (idem.Key, error) {
	return idem.ParseKey(uuid.NewString()) // want `key given to idem.ParseKey is built from uuid.NewString\(\)`
}

func uuidPart(orderID string) (idem.Key, error) {
	return idem.DeriveKey("charge", 1, orderID, uuid.New().String()) // want `derived by idem.DeriveKey is built from uuid.New\(\)`
}

func clockKey(orderID string) idem.Request {
	k := fmt.Sprintf("charge:v1:%s:%d", orderID, time.Now().UnixNano())
	return idem.Request{Key: idem.Key(k)} // want `idem.Request key is built from time.Now\(\)`
}

func randomBytes() (idem.Key, error) {
	b := make([]byte, 16)
	rand.Read(b)
	return idem.ParseKey(hex.EncodeToString(b)) // want `built from crypto/rand.Read`
}

func mathRand(r *http.Request) {
	r.Header.Set("Idempotency-Key", strconv.Itoa(mrand.Int())) // want `Idempotency-Key header is built from math/rand.Int\(\)`
}

var seq int64

func counterKey(r *http.Request) {
	n := atomic.AddInt64(&seq, 1)
	r.Header.Set("Idempotency-Key", fmt.Sprint(n)) // want `Idempotency-Key header is built from atomic.AddInt64\(\)`
}

var attempts int

func globalCounter() (idem.Key, error) {
	attempts++
	return idem.DeriveKey("send", 1, strconv.Itoa(attempts)) // want `built from the counter attempts`
}

func newKey() string { return "k-" + gofrs.Must(gofrs.NewV4()).String() }

func helperKey() (idem.Key, error) {
	k := newKey()
	return idem.ParseKey(k) // want `built from uuid.NewV4\(\) \(in newKey\)`
}

func stripeKey(p *stripe.PaymentIntentParams) {
	p.IdempotencyKey = stripe.String(uuid.NewString()) // want `provider's IdempotencyKey is built from uuid.NewString\(\)`
}

func stripeSetter(p *stripe.PaymentIntentParams) {
	p.SetIdempotencyKey(fmt.Sprintf("pi-%d", time.Now().Unix())) // want `provider idempotency key is built from time.Now\(\)`
}

func fallback(r *http.Request) (idem.Key, error) {
	k := r.Header.Get("Idempotency-Key")
	if k == "" {
		k = uuid.NewString() // the retrying layer must not own the key
	}
	return idem.ParseKey(k) // want `built from uuid.NewString\(\)`
}
