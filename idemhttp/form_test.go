package idemhttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// TestFormBodies: a form body is fingerprinted by its meaning, as Stripe's
// SDKs encode it (stripe-go escapes brackets, stripe-node does not; either
// may order parameters its own way), and a 422 names the top-level field
// a retry changed.
func TestFormBodies(t *testing.T) {
	e := stripeEnv(t, idemhttp.CompatIETF, idem.Config{})
	wantStatus(t, e.form("f-1", "amount=100&currency=usd&metadata%5Border%5D=6735&description=Order+1"), http.StatusOK)
	for _, body := range []string{
		"currency=usd&amount=100&description=Order%201&metadata[order]=6735",
		"metadata[order]=6735&description=Order+1&currency=%75sd&amount=100&",
	} {
		r := e.form("f-1", body)
		wantStatus(t, r, http.StatusOK)
		if r.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Errorf("%q: not replayed", body)
		}
	}
	for body, field := range map[string]string{
		"amount=100&currency=usd&metadata[order]=6736&description=Order+1": "metadata",
		"amount=100&currency=eur&metadata[order]=6735&description=Order+1": "currency",
	} {
		p := wantProblem(t, e.form("f-1", body), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if len(p.Fields) != 1 || p.Fields[0] != field {
			t.Errorf("%q: fields %q, want [%s]", body, p.Fields, field)
		}
	}
	// The same bytes sent as another media type are another request.
	wantProblem(t, e.do("POST", "/v1/charges", "f-1", "amount=100&currency=usd&metadata%5Border%5D=6735&description=Order+1",
		"Content-Type", "text/plain", "X-User-Id", "user-1"), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	e.wantCalls(1)
}

// TestFormRecordedBeforeCanonicalForm: a record claimed when form bodies
// were hashed as bytes (before this version) replays for a byte-identical
// retry instead of answering 422, for as long as such records live.
func TestFormRecordedBeforeCanonicalForm(t *testing.T) {
	e := stripeEnv(t, idemhttp.CompatIETF, idem.Config{})
	body := "currency=usd&amount=100"
	legacy, _, _ := idem.FingerprintBody("POST", "/v1/charges", []byte(body), false)
	rr := &idemhttp.RecordedResponse{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ch_old"}`)}
	result, err := rr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	cr, err := e.store.Claim(ctx, idem.ClaimParams{Scope: "user-1", Key: "old", Fingerprint: legacy, AttemptID: "a1", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim: %+v, %v", cr, err)
	}
	if _, err := e.store.Finish(ctx, idem.FinishParams{Scope: "user-1", Key: "old", Fence: cr.Record.Fence, AttemptID: "a1",
		State: idem.StateSucceeded, Result: result, CompletedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r := e.form("old", body)
	wantStatus(t, r, http.StatusOK)
	if r.body != `{"id":"ch_old"}` || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry of a record hashed as bytes: %d %q replayed=%q; want the recorded charge", r.status, r.body, r.header.Get(idemhttp.ReplayedHeader))
	}
	// Another body is still a mismatch.
	wantProblem(t, e.form("old", "amount=100&currency=usd"), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	e.wantCalls(0)
}
