package reconcile

import (
	"net/http"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// ProblemNotApplied is the problem type of the response recorded on a
// record made over HTTP that reconciliation or recovery decided as not
// applied (see [HTTPNotApplied]).
const ProblemNotApplied = "https://github.com/idemkit/idem/blob/main/docs/reconciliation.md#not-applied"

// Resolution is the JSON body of the response [HTTPResult] records.
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

// HTTPResult is the response recorded on a record made over HTTP
// (idemhttp's middleware, idem proxy) that the provider applied: 200,
// Content-Type application/json, a [Resolution] body naming the provider's
// entry. Retries with the key replay it; the upstream's own response was
// lost with the attempt that crashed.
func HTTPResult(a Applied) ([]byte, error) {
	return idemhttp.ResolvedResponse(http.StatusOK, Resolution{Object: "idem.resolution", Status: "applied",
		ForwardKey: a.Key, Reference: a.Reference, Amount: a.Amount, Currency: a.Currency, AppliedAt: a.AppliedAt})
}

// HTTPNotApplied is the response recorded on a record made over HTTP that
// the provider declined or never applied: 422 with a problem document
// (type [ProblemNotApplied], detail says why). Retries with the key replay
// it; a new attempt needs a new key.
func HTTPNotApplied(detail string) ([]byte, error) {
	return idemhttp.ResolvedResponse(http.StatusUnprocessableEntity, map[string]any{
		"type": ProblemNotApplied, "title": "not applied", "status": http.StatusUnprocessableEntity,
		"detail": detail + "; retry with a new key to try again"})
}

// appliedValue is the result recorded on rec for an applied entry: the
// response HTTP records replay, or the configured value for engine ones.
func appliedValue(rec idem.Record, a Applied, result func(Applied) ([]byte, error)) ([]byte, error) {
	if idemhttp.MadeRecord(&rec) {
		return HTTPResult(a)
	}
	return result(a)
}

// failureValue is the result recorded on rec decided as not applied: a
// problem response for HTTP records, the failure message for engine ones.
func failureValue(rec idem.Record, msg string) ([]byte, error) {
	if idemhttp.MadeRecord(&rec) {
		return HTTPNotApplied(msg)
	}
	return []byte(msg), nil
}
