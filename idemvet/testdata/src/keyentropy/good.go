package keyentropy

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/idemkit/idem"
	stripe "github.com/stripe/stripe-go/v76"
)

type Order struct{ ID, PaymentAttemptID string }

// The README's derivation: immutable upstream ids.
func readme(ctx context.Context, e *idem.Engine, order Order, principal string) error {
	key, err := idem.DeriveKey("charge", 1, order.ID, order.PaymentAttemptID)
	if err != nil {
		return err
	}
	_, _, err = idem.Do(ctx, e, idem.Request{Scope: principal, Key: key}, func(ctx context.Context, a *idem.Attempt) (string, error) {
		return a.ForwardKey(), nil
	})
	return err
}

// The client owns the key.
func fromHeader(r *http.Request) (idem.Key, error) {
	return idem.ParseKey(r.Header.Get("Idempotency-Key"))
}

// Forwarding the caller's key to the provider.
func forward(in *http.Request, out *http.Request) {
	out.Header.Set("Idempotency-Key", in.Header.Get("Idempotency-Key"))
}

// A uuid parsed from a stored id is that id, not a new one.
func parsedID(stored string) (idem.Key, error) {
	u, err := uuid.Parse(stored)
	if err != nil {
		return "", err
	}
	return idem.ParseKey(u.String())
}

// A random request id and a timestamp that are not the key.
func notTheKey(r *http.Request, w http.ResponseWriter, orderID string) (idem.Key, error) {
	r.Header.Set("X-Request-Id", uuid.NewString())
	// A response header is not a key anything retries with.
	w.Header().Set("Idempotency-Key", uuid.NewString())
	_ = time.Now()
	return idem.DeriveKey("refund", 1, orderID)
}

// The key stored with the order when it was created, forwarded to stripe.
func stripeStored(p *stripe.PaymentIntentParams, o Order) {
	p.IdempotencyKey = stripe.String("pi:v1:" + o.ID)
}

func keyOf(o Order) string { return "charge:v1:" + o.ID }

// A same-package helper over stored ids.
func helperStored(o Order) (idem.Key, error) { return idem.ParseKey(keyOf(o)) }

// A loop index is not a counter of attempts.
func batch(orders []Order) {
	for i := range orders {
		_, _ = idem.DeriveKey("line", 1, orders[i].ID)
	}
}
