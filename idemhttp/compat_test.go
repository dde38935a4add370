package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// stripeCharges is a Stripe-shaped handler: a form POST that needs an
// amount (400 invalid_request_error without one, as Stripe answers a
// request that fails validation), declines amount 402 (a card error,
// which Stripe saves), and otherwise answers a charge with its own
// Request-Id and Stripe-Version.
func stripeCharges(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	switch r.PostForm.Get("amount") {
	case "":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"parameter_missing","param":"amount","message":"Missing required param: amount."}}`))
		return
	case "402":
		w.Header().Set("Request-Id", "req_declined")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}`))
		return
	}
	w.Header().Set("Request-Id", "req_upstream")
	w.Header().Set("Stripe-Version", "2025-01-27.acacia")
	w.Header().Set(idemhttp.HeaderName, r.Header.Get(idemhttp.HeaderName))
	_, _ = w.Write([]byte(`{"id":"ch_1","object":"charge","amount":` + r.PostForm.Get("amount") + `}`))
}

func stripeEnv(t *testing.T, compat idemhttp.Compat, ecfg idem.Config) *env {
	t.Helper()
	return newEnv(t, storeCases()[0].open, ecfg, idemhttp.Config{Compat: compat,
		Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, stripeCharges)
}

// form sends a form POST as a Stripe SDK does, in scope user-1.
func (e *env) form(key, body string) reply {
	e.t.Helper()
	return e.do("POST", "/v1/charges", key, body, "Content-Type", "application/x-www-form-urlencoded", "X-User-Id", "user-1")
}

type stripeBody struct {
	Error *idemhttp.ProblemError `json:"error"`
}

func stripeError(t *testing.T, r reply) *idemhttp.ProblemError {
	t.Helper()
	var b stripeBody
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Error == nil {
		t.Fatalf("body %q carries no error member: %v", r.body, err)
	}
	return b.Error
}

// TestStripeMismatch: under CompatStripe a key reused with another request
// is answered as Stripe answers it — 400 idempotency_error — which
// stripe-go raises as *stripe.IdempotencyError and stripe-node as
// StripeIdempotencyError; the IETF default stays 422.
func TestStripeMismatch(t *testing.T) {
	for _, tc := range []struct {
		compat       idemhttp.Compat
		status       int
		typ, message string
	}{
		{idemhttp.CompatStripe, http.StatusBadRequest, "idempotency_error", "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'order-1' if you meant to execute a different request. Parameters that differ: amount."},
		{idemhttp.CompatIETF, http.StatusUnprocessableEntity, "invalid_request_error", ""},
	} {
		t.Run(tc.compat.String(), func(t *testing.T) {
			e := stripeEnv(t, tc.compat, idem.Config{})
			wantStatus(t, e.form("order-1", "amount=100&currency=usd"), http.StatusOK)
			r := e.form("order-1", "amount=200&currency=usd")
			p := wantProblem(t, r, tc.status, idemhttp.TypeKeyMismatch)
			if len(p.Fields) != 1 || p.Fields[0] != "amount" {
				t.Errorf("fields %q, want [amount]", p.Fields)
			}
			se := stripeError(t, r)
			if se.Type != tc.typ || se.Code != "idempotency_key_mismatch" {
				t.Errorf("error %+v, want type %s, code idempotency_key_mismatch", se, tc.typ)
			}
			if tc.message != "" && (se.Message != tc.message || se.Param != "amount") {
				t.Errorf("message %q param %q; want %q, amount", se.Message, se.Param, tc.message)
			}
			if r.header.Get("Stripe-Should-Retry") != "false" {
				t.Errorf("Stripe-Should-Retry %q, want false", r.header.Get("Stripe-Should-Retry"))
			}
			e.wantCalls(1)
		})
	}
}

// TestStripeHeadersOnEveryAnswer: under CompatStripe every answer to a
// protected request carries Request-Id — the handler's, the recorded one
// on a replay, or one made for it — and the request's Idempotency-Key;
// a replay carries the recorded Stripe-Version. The IETF default adds
// neither.
func TestStripeHeadersOnEveryAnswer(t *testing.T) {
	e := stripeEnv(t, idemhttp.CompatStripe, idem.Config{})
	first := e.form("order-2", "amount=100&currency=usd")
	wantStatus(t, first, http.StatusOK)
	if got := first.header.Values("Request-Id"); len(got) != 1 || got[0] != "req_upstream" {
		t.Errorf("first answer Request-Id %q, want the handler's alone", got)
	}
	replay := e.form("order-2", "currency=usd&amount=100")
	wantStatus(t, replay, http.StatusOK)
	for name, want := range map[string]string{idemhttp.ReplayedHeader: "true", "Request-Id": "req_upstream",
		"Stripe-Version": "2025-01-27.acacia", idemhttp.HeaderName: "order-2"} {
		if got := replay.header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("replay %s = %q, want %q", name, got, want)
		}
	}
	// Problems: a malformed key, a mismatch.
	for _, r := range []reply{e.form(`"unterminated`, "amount=1"), e.form("order-2", "amount=101")} {
		if r.status < 400 {
			t.Fatalf("status %d, want a problem", r.status)
		}
		if id := r.header.Get("Request-Id"); !strings.HasPrefix(id, "req_") || len(id) != 28 {
			t.Errorf("problem %d without a Request-Id: %q", r.status, id)
		}
	}
	if a, b := e.form("order-2", "amount=101").header.Get("Request-Id"), e.form("order-2", "amount=101").header.Get("Request-Id"); a == b {
		t.Errorf("two problems share Request-Id %q", a)
	}
	if got := e.form("order-2", "amount=101").header.Get(idemhttp.HeaderName); got != "order-2" {
		t.Errorf("problem Idempotency-Key %q, want the request's", got)
	}

	ietf := stripeEnv(t, idemhttp.CompatIETF, idem.Config{})
	wantStatus(t, ietf.form("order-2", "amount=100"), http.StatusOK)
	r := ietf.form("order-2", "amount=101")
	if r.header.Get("Request-Id") != "" || r.header.Get(idemhttp.HeaderName) != "" {
		t.Errorf("IETF problem with Request-Id %q, Idempotency-Key %q", r.header.Get("Request-Id"), r.header.Get(idemhttp.HeaderName))
	}
	if got := ietf.form("order-2", "amount=100").header.Get("Stripe-Version"); got != "" {
		t.Errorf("IETF replay with Stripe-Version %q: not recorded by default", got)
	}
}

// TestStripeReleasesValidationFailures: under CompatStripe a 400 (the
// request failed validation, nothing ran) is released, not recorded, so
// the client fixes its parameters and retries with the same key; a 402
// (a declined card: the charge was attempted) is recorded as Stripe saves
// it. Under the IETF default the 400 is recorded.
func TestStripeReleasesValidationFailures(t *testing.T) {
	e := stripeEnv(t, idemhttp.CompatStripe, idem.Config{})
	wantStatus(t, e.form("order-3", "currency=usd"), http.StatusBadRequest)
	fixed := e.form("order-3", "currency=usd&amount=300")
	wantStatus(t, fixed, http.StatusOK)
	if fixed.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Error("the fixed request was answered as a replay")
	}
	wantStatus(t, e.form("order-4", "currency=usd&amount=402"), http.StatusPaymentRequired)
	again := e.form("order-4", "currency=usd&amount=402")
	wantStatus(t, again, http.StatusPaymentRequired)
	if again.header.Get(idemhttp.ReplayedHeader) != "true" || again.header.Get("Request-Id") != "req_declined" {
		t.Errorf("a declined charge's retry: replayed %q, Request-Id %q; want the recorded decline",
			again.header.Get(idemhttp.ReplayedHeader), again.header.Get("Request-Id"))
	}
	e.wantCalls(3)

	ietf := stripeEnv(t, idemhttp.CompatIETF, idem.Config{})
	wantStatus(t, ietf.form("order-3", "currency=usd"), http.StatusBadRequest)
	wantProblem(t, ietf.form("order-3", "currency=usd&amount=300"), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	ietf.wantCalls(1)
}

// TestStripeReleasesEveryValidationStatus: each status Stripe saves no
// result for (400, 404, 405, 415, 422, 429) is released under
// CompatStripe, so the retry with the key runs again instead of replaying
// it; 402 and 409 (the request was attempted) are recorded. The list is
// written out here, not read from StripeReleaseStatuses, so that a status
// dropped from (or added to) the profile's list fails.
func TestStripeReleasesEveryValidationStatus(t *testing.T) {
	e := newEnv(t, storeCases()[0].open, idem.Config{}, idemhttp.Config{Compat: idemhttp.CompatStripe,
		Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		status, _ := strconv.Atoi(r.PostForm.Get("status"))
		w.WriteHeader(status)
	})
	calls := int64(0)
	for status, released := range map[int]bool{400: true, 404: true, 405: true, 415: true, 422: true, 429: true, 402: false, 409: false} {
		key, body := "status-"+strconv.Itoa(status), "status="+strconv.Itoa(status)
		wantStatus(t, e.form(key, body), status)
		again := e.form(key, body)
		wantStatus(t, again, status)
		calls++
		if replayed := again.header.Get(idemhttp.ReplayedHeader) == "true"; replayed == released {
			t.Errorf("status %d: the retry was replayed=%v; want released=%v", status, replayed, released)
		}
		if released {
			calls++
		}
	}
	e.wantCalls(calls)
}

// TestStripeReleaseStatusesConfigurable: an explicit list replaces the
// profile's, and an empty one releases nothing.
func TestStripeReleaseStatusesConfigurable(t *testing.T) {
	e := newEnv(t, storeCases()[0].open, idem.Config{}, idemhttp.Config{Compat: idemhttp.CompatStripe,
		ReleaseStatuses: []int{}, Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, stripeCharges)
	wantStatus(t, e.form("order-5", "currency=usd"), http.StatusBadRequest)
	if r := e.form("order-5", "currency=usd"); r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Error("with ReleaseStatuses: []int{} a 400 was not recorded")
	}
	e.wantCalls(1)
}

// TestStripeInFlightKeepsRetryAfter: an in-flight 409 keeps Retry-After
// (waiting does resolve it) under either profile.
func TestStripeInFlightKeepsRetryAfter(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, storeCases()[0].open, idem.Config{RetryAfter: 2 * time.Second}, idemhttp.Config{Compat: idemhttp.CompatStripe},
		func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
		})
	done := make(chan reply)
	go func() { done <- doURL(t, "POST", e.srv.URL+"/x", "k", "{}") }()
	<-started
	r := e.do("POST", "/x", "k", "{}")
	close(release)
	<-done
	wantProblem(t, r, http.StatusConflict, idemhttp.TypeInFlight)
	if r.header.Get("Retry-After") != "2" || r.header.Get("Stripe-Should-Retry") != "true" || r.header.Get("Request-Id") == "" {
		t.Errorf("in-flight 409: Retry-After %q, Stripe-Should-Retry %q, Request-Id %q", r.header.Get("Retry-After"),
			r.header.Get("Stripe-Should-Retry"), r.header.Get("Request-Id"))
	}
	if se := stripeError(t, r); se.Type != "idempotency_error" || se.Code != "idempotency_key_in_use" {
		t.Errorf("in-flight error %+v", se)
	}
}

func TestCompatConfig(t *testing.T) {
	eng, err := idem.New(storeCases()[0].open(t), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if _, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, Compat: 7}); err == nil || !strings.Contains(err.Error(), "Config.Compat") {
		t.Errorf("Compat 7: %v, want an error naming Config.Compat", err)
	}
	for s, want := range map[string]idemhttp.Compat{"stripe": idemhttp.CompatStripe, "IETF": idemhttp.CompatIETF} {
		if c, err := idemhttp.ParseCompat(s); err != nil || c != want {
			t.Errorf("ParseCompat(%q) = %v, %v", s, c, err)
		}
	}
	if _, err := idemhttp.ParseCompat("paypal"); err == nil {
		t.Error("ParseCompat(paypal) accepted")
	}
}
