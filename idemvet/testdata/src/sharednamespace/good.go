package sharednamespace

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idem"
	stripe "github.com/stripe/stripe-go/v76"
)

// The README's derivation: one namespace per operation, versioned.
func chargeKey(o Order) (idem.Key, error) {
	return idem.DeriveKey("charge", 1, o.ID, o.AttemptID)
}

func refundKey(o Order) (idem.Key, error) {
	return idem.DeriveKey("refund", 1, o.ID)
}

// The same namespace for one operation in two places (the handler and the
// reconciler of a charge) is one intent, not two.
func reconcileCharge(o Order) (idem.Key, error) {
	return idem.DeriveKey("charge", 1, o.ID, o.AttemptID)
}

// The field guide's versioned format.
func chargeFormat(p *stripe.Params, o Order) {
	p.IdempotencyKey = stripe.String(fmt.Sprintf("charge:v1:%s:%s", o.ID, o.AttemptID))
}

// The client's key, forwarded.
func forward(in, out *http.Request) {
	out.Header.Set("Idempotency-Key", in.Header.Get("Idempotency-Key"))
}

// A Sprintf that is not a key.
func logLine(o Order) string { return fmt.Sprintf("order %s", o.ID) }

// Versioned by concatenation.
func refundConcat(o Order) (idem.Key, error) { return idem.ParseKey("refund:v2:" + o.ID) }
