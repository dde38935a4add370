package sharednamespace

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idem"
	stripe "github.com/stripe/stripe-go/v76"
)

type Order struct{ ID, AttemptID string }

// Charge and refund from one namespace: the refund replays the charge.
func chargeOrder(o Order) (idem.Key, error) {
	return idem.DeriveKey("order", 1, o.ID)
}

func refundOrder(o Order) (idem.Key, error) {
	return idem.DeriveKey("order", 1, o.ID) // want `namespace "order" is shared by chargeOrder \(charge\) and refundOrder \(refund\)`
}

// The same with format strings.
func captureKey(o Order) (idem.Key, error) {
	return idem.ParseKey(fmt.Sprintf("pay:v1:%s", o.ID))
}

func voidKey(o Order) (idem.Key, error) {
	return idem.ParseKey(fmt.Sprintf("pay:v1:%s", o.ID)) // want `namespace "pay" is shared by captureKey \(capture\) and voidKey \(void\)`
}

// No version.
func sendEmail(r *http.Request, o Order) {
	r.Header.Set("Idempotency-Key", fmt.Sprintf("email:%s", o.ID)) // want `key format "email:%s" has no version`
}

// No version, by concatenation, into stripe.
func payout(p *stripe.Params, o Order) {
	p.IdempotencyKey = stripe.String("payout-" + o.ID) // want `key format "payout-%s" has no version`
}

// No namespace at all.
func transfer(o Order) idem.Request {
	return idem.Request{Key: idem.Key(fmt.Sprintf("%s:%s", o.ID, o.AttemptID))} // want `key format "%s:%s" has no operation namespace`
}

// Through a variable, and the operation named by the request.
func anything(o Order) idem.Request {
	k := "order:v1:" + o.ID // want `namespace "order" is shared by chargeOrder \(charge\) and anything \(cancel\)`
	return idem.Request{Key: idem.Key(k), Operation: "cancel"}
}
