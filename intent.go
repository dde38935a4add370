package idem

import (
	"encoding/json"
)

// Intent is the intent journal written with the claim, before the effect
// runs, so that a crash between a provider call and the outcome leaves an
// unknown record that says what was intended.
type Intent struct {
	// Operation names the business action ("charge", "refund").
	Operation string `json:"operation,omitempty"`
	// Amount in integer minor units (cents); never a float.
	Amount int64 `json:"amount,omitempty"`
	// Currency is an ISO 4217 code.
	Currency string `json:"currency,omitempty"`
	// Counterparty names the provider or peer the effect goes to.
	Counterparty string `json:"counterparty,omitempty"`
	// ForwardKey is the key forwarded to the provider. Empty means the
	// request's key. It must be stable across every attempt of the intent.
	ForwardKey string `json:"forward_key,omitempty"`
	// Origin names what made the record and so decodes its result; a
	// decision taken outside the request path (reconciliation, recovery,
	// an operator) stores a result of that form, written by the origin's
	// [DecisionEncoder] ([EncodeDecision]). Empty means an engine caller
	// ([Do] and [Engine.DoBytes], and so the consumer, webhook and batch
	// packages): the result is the handler's value in the engine's codec.
	// Each adapter writes its own: idemhttp's middleware (and idem proxy)
	// "http", a recorded HTTP response; idemgrpc "grpc", a recorded gRPC
	// answer; idemmcp "mcp", a tool result.
	Origin string `json:"origin,omitempty"`
	// Fields holds any other business fields.
	Fields map[string]string `json:"fields,omitempty"`
}

// IntentBuilder builds a request's intent on demand; see
// [Request.LazyIntent].
type IntentBuilder interface {
	BuildIntent() *Intent
}

// DecodeIntent decodes a record's Intent bytes; empty bytes give nil.
func DecodeIntent(b []byte) (*Intent, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in Intent
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	return &in, nil
}
