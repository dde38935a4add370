package reconcile

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/idemkit/idem"
)

// ProblemNotApplied is the problem type of the response recorded on a
// record made over HTTP that reconciliation or recovery decided as not
// applied (see [NotAppliedDecision]).
const ProblemNotApplied = "https://github.com/idemkit/idem/blob/main/docs/reconciliation.md#not-applied"

// Resolution is the JSON body of [AppliedDecision]: what a record made by
// an adapter replays once the provider is found to have applied it.
type Resolution struct {
	// Object is always "idem.resolution": this body was written by a
	// decision, not by the upstream.
	Object string `json:"object"`
	// Status is "applied".
	Status string `json:"status"`
	// ForwardKey is the key the provider applied.
	ForwardKey string `json:"forward_key"`
	// Reference is the provider's own id of the entry, when it gave one.
	Reference string `json:"reference,omitempty"`
	// Amount in minor units of Currency, as the provider applied it.
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency,omitempty"`
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// AppliedDecision is the decision recorded on a record that the provider
// applied, when an adapter made the record (its intent names an origin):
// succeeded, with a [Resolution] body (JSON) naming the provider's entry.
// The adapter's encoder writes it in the form its retries replay — over
// HTTP, 200 application/json with that body; see each adapter's
// EncodeDecision. The adapter's own answer was lost with the attempt that
// crashed.
func AppliedDecision(a Applied) idem.Decision {
	b, _ := json.Marshal(Resolution{Object: "idem.resolution", Status: "applied", // a Resolution always marshals
		ForwardKey: a.Key, Reference: a.Reference, Amount: a.Amount, Currency: a.Currency, AppliedAt: a.AppliedAt})
	return idem.Decision{As: idem.StateSucceeded, Body: b, ContentType: "application/json",
		Message: "the provider applied the request"}
}

// NotAppliedDecision is the decision recorded on a record that the provider
// declined or never applied, when an adapter made the record: failed, with
// detail (why) as its message, and for HTTP a 422 problem document (type
// [ProblemNotApplied]). Retries with the key replay it; a new attempt
// needs a new key.
func NotAppliedDecision(detail string) idem.Decision {
	detail += "; retry with a new key to try again"
	b, _ := json.Marshal(map[string]any{ // a map of strings and an int always marshals
		"type": ProblemNotApplied, "title": "not applied", "status": http.StatusUnprocessableEntity, "detail": detail})
	return idem.Decision{As: idem.StateFailed, Status: http.StatusUnprocessableEntity, Body: b,
		ContentType: "application/problem+json", Message: detail}
}

// appliedValue is the result recorded on rec for an applied entry: the
// configured value for a record made by an engine caller, the adapter's
// form of [AppliedDecision] for any other.
func appliedValue(rec idem.Record, a Applied, result func(Applied) ([]byte, error)) ([]byte, error) {
	d := AppliedDecision(a)
	if rec.Origin() == "" {
		b, err := result(a)
		if err != nil {
			return nil, err
		}
		if b == nil {
			b = []byte{} // the value is empty, not missing
		}
		d = idem.Decision{As: idem.StateSucceeded, Body: b}
	}
	return idem.EncodeDecision(&rec, d)
}

// failureValue is the result recorded on rec decided as not applied: the
// failure message for a record made by an engine caller, the adapter's
// form of [NotAppliedDecision] for any other.
func failureValue(rec idem.Record, msg string) ([]byte, error) {
	d := NotAppliedDecision(msg)
	if rec.Origin() == "" {
		d = idem.Decision{As: idem.StateFailed, Message: msg}
	}
	return idem.EncodeDecision(&rec, d)
}
