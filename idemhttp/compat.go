package idemhttp

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Compat is the client profile a [Middleware] answers for: the shape of
// its problems and the headers it adds, for clients written against one
// API. See docs/http.md, "Profiles", for the two side by side.
type Compat int

const (
	// CompatIETF answers as the IETF Idempotency-Key draft and RFC 9457
	// say: a reused key with another request is 422, every problem an
	// application/problem+json document whose "error" member lets
	// Stripe-style SDKs raise it.
	CompatIETF Compat = iota
	// CompatStripe answers as Stripe's API does, for clients built on
	// Stripe's SDKs (stripe-go, stripe-node) in front of a Stripe-shaped
	// API:
	//   - a reused key with another request is 400 with error type
	//     idempotency_error, so the SDKs raise their idempotency errors
	//     (*stripe.IdempotencyError, StripeIdempotencyError);
	//   - every answer to a protected request carries Request-Id (the
	//     upstream's, or one made here, req_…) and echoes the request's
	//     Idempotency-Key unless the handler set them;
	//   - [StripeRecordHeaders] are recorded and replayed;
	//   - Config.ReleaseStatuses defaults to [StripeReleaseStatuses]:
	//     Stripe saves no result for a request that failed validation, so
	//     a client may fix its parameters and retry with the same key.
	CompatStripe
)

func (c Compat) String() string {
	switch c {
	case CompatIETF:
		return "ietf"
	case CompatStripe:
		return "stripe"
	}
	return fmt.Sprintf("Compat(%d)", int(c))
}

// ParseCompat returns the profile named s: "ietf" or "stripe".
func ParseCompat(s string) (Compat, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ietf":
		return CompatIETF, nil
	case "stripe":
		return CompatStripe, nil
	}
	return 0, fmt.Errorf("idemhttp: unknown compatibility profile %q (want ietf or stripe)", s)
}

// StripeReleaseStatuses are the response statuses released instead of
// recorded under [CompatStripe] when Config.ReleaseStatuses is not set:
// those of requests that failed validation before anything ran (400, 404,
// 405, 415, 422) and 429, as Stripe saves no result for them. A handler
// that answers one of them after acting must not run under this profile
// with the default, or a retry acts again.
var StripeReleaseStatuses = []int{400, 404, 405, 415, 422, 429}

// StripeRecordHeaders are recorded and replayed under [CompatStripe]
// besides [DefaultRecordHeaders]: stripe-go's LastResponse.IdempotencyKey
// and stripe-node's lastResponse read Idempotency-Key, and Stripe-Version
// names the API version the response was made with.
var StripeRecordHeaders = []string{"Idempotency-Key", "Stripe-Version"}

// stripeMismatch is the problem for a key reused with another request,
// as Stripe answers it: 400, idempotency_error.
func stripeMismatch(p *Problem, key string) {
	msg := "Keys for idempotent requests can only be used with the same parameters they were first used with. " +
		"Try using a key other than '" + key + "' if you meant to execute a different request."
	pe := &ProblemError{Type: "idempotency_error", Code: "idempotency_key_mismatch", Message: msg}
	if len(p.Fields) > 0 {
		pe.Message += " Parameters that differ: " + strings.Join(p.Fields, ", ") + "."
	}
	if len(p.Fields) == 1 {
		pe.Param = p.Fields[0]
	}
	p.Status = http.StatusBadRequest
	p.Error = pe
}

// stripeWriter adds, as the response's status is written, the headers
// Stripe puts on every answer when the handler (or the recorded response)
// did not: Request-Id and the request's Idempotency-Key.
type stripeWriter struct {
	http.ResponseWriter
	key   string // the request's Idempotency-Key, as sent
	wrote bool
}

func (s *stripeWriter) fill(code int) {
	if s.wrote || code < 200 {
		return // informational answers come before the final one
	}
	s.wrote = true
	h := s.Header()
	if h.Get("Request-Id") == "" {
		h.Set("Request-Id", newRequestID())
	}
	if h.Get(HeaderName) == "" && s.key != "" {
		h.Set(HeaderName, s.key)
	}
}

func (s *stripeWriter) WriteHeader(code int) {
	s.fill(code)
	s.ResponseWriter.WriteHeader(code)
}

func (s *stripeWriter) Write(p []byte) (int, error) {
	s.fill(http.StatusOK)
	return s.ResponseWriter.Write(p)
}

// Flush lets the answer's headers out as a flush sends them.
func (s *stripeWriter) Flush() {
	s.fill(http.StatusOK)
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *stripeWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// newRequestID is a request id in Stripe's form: req_ and 24 hex digits.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "req_" + hex.EncodeToString(b[:])
}
