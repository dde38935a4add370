package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// transfer is a handler that counts its runs and answers 201.
type transfer struct{ runs atomic.Int64 }

func (tr *transfer) v2(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	n := tr.runs.Add(1)
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"transfer":` + strings.Repeat("1", int(n)) + `}`}, nil
}

func problemType(t *testing.T, body string) string {
	t.Helper()
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("body %q is not a problem: %v", body, err)
	}
	return p.Type
}

func TestV2ReplaysTheRecordedResponse(t *testing.T) {
	eng, _ := memEngine(t)
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng}).APIGatewayV2(tr.v2)
	ctx := invocation(t, time.Minute)
	first, err := h(ctx, v2Event("k1", `{"amount":50}`, "alice"))
	if err != nil || first.StatusCode != 201 || first.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	again, err := h(ctx, v2Event("k1", `{ "amount" : 50 }`, "alice"))
	if err != nil || again.StatusCode != 201 || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("replay = %+v, %v; want the first response with Idempotent-Replayed", again, err)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
	// Same key, another principal: its own intent, never alice's response.
	bob, err := h(ctx, v2Event("k1", `{"amount":50}`, "bob"))
	if err != nil || bob.Headers["Idempotent-Replayed"] != "" || tr.runs.Load() != 2 {
		t.Fatalf("another principal's request = %+v, %v (runs %d)", bob, err, tr.runs.Load())
	}
}

func TestRefusals(t *testing.T) {
	eng, _ := memEngine(t)
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng}).APIGatewayV2(tr.v2)
	ctx := invocation(t, time.Minute)
	for _, c := range []struct {
		name   string
		ev     events.APIGatewayV2HTTPRequest
		status int
		typ    string
	}{
		{"no key", v2Event("", `{}`, "alice"), 400, idemhttp.TypeKeyMissing},
		{"bad key", v2Event("\"a\x01\"", `{}`, "alice"), 400, idemhttp.TypeKeyInvalid},
		{"no principal", v2Event("k", `{}`, ""), 401, idemhttp.TypeScopeMissing},
		{"bad json", v2Event("k", `{"amount":`, "alice"), 400, idemhttp.TypeBodyInvalidJSON},
	} {
		resp, err := h(ctx, c.ev)
		if err != nil || resp.StatusCode != c.status || problemType(t, resp.Body) != c.typ {
			t.Errorf("%s: %d %s, %v; want %d %s", c.name, resp.StatusCode, resp.Body, err, c.status, c.typ)
		}
	}
	if _, err := h(ctx, v2Event("m", `{"amount":50}`, "alice")); err != nil {
		t.Fatal(err)
	}
	resp, _ := h(ctx, v2Event("m", `{"amount":60}`, "alice"))
	if resp.StatusCode != 422 || problemType(t, resp.Body) != idemhttp.TypeKeyMismatch {
		t.Errorf("other body, same key = %d %s, want 422 key-mismatch", resp.StatusCode, resp.Body)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
}

func TestOptionalKeyRunsUnprotected(t *testing.T) {
	eng, _ := memEngine(t)
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng, Optional: true}).APIGatewayV2(tr.v2)
	ctx := invocation(t, time.Minute)
	for range 2 {
		if resp, err := h(ctx, v2Event("", `{}`, "")); err != nil || resp.StatusCode != 201 {
			t.Fatalf("unkeyed = %+v, %v", resp, err)
		}
	}
	if tr.runs.Load() != 2 {
		t.Fatalf("runs = %d, want 2 (no key, no protection)", tr.runs.Load())
	}
}

// TestPointersKeyAndValidateASubset: the key from the body, the
// fingerprint from two fields only (Powertools' event_key_jmespath and
// payload_validation_jmespath).
func TestPointersKeyAndValidateASubset(t *testing.T) {
	eng, _ := memEngine(t)
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng, KeyPointer: "/body/transfer_id",
		FingerprintPointers: []string{"/body/amount", "/body/account"}}).APIGatewayV2(tr.v2)
	ctx := invocation(t, time.Minute)
	first, err := h(ctx, v2Event("", `{"transfer_id":"t-1","amount":50,"account":"A","sent_at":"10:00"}`, "alice"))
	if err != nil || first.StatusCode != 201 {
		t.Fatalf("first = %+v, %v", first, err)
	}
	// Another timestamp, same validated fields: a replay.
	again, _ := h(ctx, v2Event("", `{"sent_at":"10:01","account":"A","amount":50,"transfer_id":"t-1"}`, "alice"))
	if again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("retry differing outside the validated fields = %+v, want a replay", again)
	}
	// Another amount: a mismatch, never a replay.
	other, _ := h(ctx, v2Event("", `{"transfer_id":"t-1","amount":60,"account":"A","sent_at":"10:00"}`, "alice"))
	if other.StatusCode != 422 {
		t.Fatalf("validated field changed = %d %s, want 422", other.StatusCode, other.Body)
	}
	// A numeric id is a key too; a body without the member is missing one.
	if r, _ := h(ctx, v2Event("", `{"transfer_id":7,"amount":1,"account":"B"}`, "alice")); r.StatusCode != 201 {
		t.Fatalf("numeric key = %d %s", r.StatusCode, r.Body)
	}
	if r, _ := h(ctx, v2Event("", `{"amount":1}`, "alice")); r.StatusCode != 400 || problemType(t, r.Body) != idemhttp.TypeKeyMissing {
		t.Fatalf("no key member = %d %s, want 400 key-missing", r.StatusCode, r.Body)
	}
	if n := tr.runs.Load(); n != 2 {
		t.Fatalf("effect ran %d times, want 2", n)
	}
}

func TestV1AndFunctionURL(t *testing.T) {
	eng, _ := memEngine(t)
	var runs atomic.Int64
	w := newHTTP(t, Config{Engine: eng})
	v1 := w.APIGatewayV1(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs.Add(1)
		return events.APIGatewayProxyResponse{StatusCode: 200, Body: "v1:" + ev.Body}, nil
	})
	ev1 := events.APIGatewayProxyRequest{Resource: "/orders/{id}", Path: "/orders/9", HTTPMethod: "POST", Body: "e30=", IsBase64Encoded: true,
		Headers: map[string]string{"Idempotency-Key": `"order-9"`}}
	ev1.RequestContext.Authorizer = map[string]any{"principalId": "user-1"}
	ctx := invocation(t, time.Minute)
	for i := range 2 {
		resp, err := v1(ctx, ev1)
		if err != nil || resp.StatusCode != 200 || resp.Body != "v1:e30=" || (i == 1) != (resp.Headers["Idempotent-Replayed"] == "true") {
			t.Fatalf("v1 call %d = %+v, %v", i, resp, err)
		}
	}
	url := w.FunctionURL(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		runs.Add(1)
		return events.LambdaFunctionURLResponse{StatusCode: 202, Body: "url"}, nil
	})
	evu := events.LambdaFunctionURLRequest{RawPath: "/pay", Headers: map[string]string{"idempotency-key": "pay-1"}}
	evu.RequestContext.HTTP.Method = "POST"
	evu.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
		IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/x"}}
	for i := range 2 {
		resp, err := url(ctx, evu)
		if err != nil || resp.StatusCode != 202 || (i == 1) != (resp.Headers["Idempotent-Replayed"] == "true") {
			t.Fatalf("function URL call %d = %+v, %v", i, resp, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("runs = %d, want 2 (one per event kind)", runs.Load())
	}
}

// TestReleaseStatusRunsAgain: 429 says nothing was applied; the retry
// runs, and is then recorded.
func TestReleaseStatusRunsAgain(t *testing.T) {
	eng, st := memEngine(t)
	var runs atomic.Int64
	h := newHTTP(t, Config{Engine: eng}).APIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if runs.Add(1) == 1 {
			return events.APIGatewayV2HTTPResponse{StatusCode: 429, Body: "slow down"}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	ctx := invocation(t, time.Minute)
	r1, _ := h(ctx, v2Event("k", `{}`, "alice"))
	if _, err := st.Get(ctx, "alice", "k"); r1.StatusCode != 429 || !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("429 = %+v; record after: %v, want released", r1, err)
	}
	r2, _ := h(ctx, v2Event("k", `{}`, "alice"))
	r3, _ := h(ctx, v2Event("k", `{}`, "alice"))
	if r2.StatusCode != 200 || r3.Headers["Idempotent-Replayed"] != "true" || runs.Load() != 2 {
		t.Fatalf("after release: %+v, %+v, runs %d", r2, r3, runs.Load())
	}
}

// TestHandlerErrorIsRecordedAndReplayed: a handler error is a recorded
// failure: its retries get the error, and the effect never runs again
// (Powertools deletes the record on an exception and runs it again).
func TestHandlerErrorIsRecordedAndReplayed(t *testing.T) {
	eng, _ := memEngine(t)
	var runs atomic.Int64
	h := newHTTP(t, Config{Engine: eng}).APIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{}, errors.New("ledger refused")
	})
	ctx := invocation(t, time.Minute)
	for range 3 {
		if _, err := h(ctx, v2Event("k", `{}`, "alice")); !errors.Is(err, idem.ErrRecordedFailure) {
			t.Fatalf("err = %v, want the recorded failure", err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d, want 1", runs.Load())
	}
}

// TestNoTimeLeftClaimsNothing: an invocation whose remaining time is
// below the margin answers 503 and leaves the key free.
func TestNoTimeLeftClaimsNothing(t *testing.T) {
	eng, st := memEngine(t)
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng, DeadlineMargin: time.Second}).APIGatewayV2(tr.v2)
	resp, err := h(invocation(t, 200*time.Millisecond), v2Event("k", `{}`, "alice"))
	if err != nil || resp.StatusCode != 503 || resp.Headers["Retry-After"] == "" {
		t.Fatalf("no time left = %+v, %v; want 503 with Retry-After", resp, err)
	}
	if _, err := st.Get(context.Background(), "alice", "k"); !errors.Is(err, idem.ErrNotFound) || tr.runs.Load() != 0 {
		t.Fatalf("record = %v, runs %d; want nothing claimed or run", err, tr.runs.Load())
	}
}

// TestInFlightDuplicateGets409 while the first invocation runs.
func TestInFlightDuplicateGets409(t *testing.T) {
	eng, _ := memEngine(t)
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	h := newHTTP(t, Config{Engine: eng, Policy: idem.Policy{InFlight: idem.InFlightReject}}).APIGatewayV2(
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			close(started)
			<-release
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	ctx := invocation(t, time.Minute)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r, err := h(ctx, v2Event("k", `{}`, "alice")); err != nil || r.StatusCode != 201 {
			t.Errorf("first = %+v, %v", r, err)
		}
	}()
	<-started
	dup, err := h(ctx, v2Event("k", `{}`, "alice"))
	close(release)
	wg.Wait()
	if err != nil || dup.StatusCode != 409 || problemType(t, dup.Body) != idemhttp.TypeInFlight || dup.Headers["Retry-After"] == "" {
		t.Fatalf("in-flight duplicate = %+v, %v; want 409 in-flight with Retry-After", dup, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d", runs.Load())
	}
}

func TestBadConfig(t *testing.T) {
	eng, _ := memEngine(t)
	for _, cfg := range []Config{{}, {Engine: eng, KeyPointer: "body"}, {Engine: eng, FingerprintPointers: []string{"/a~2"}}, {Engine: eng, DeadlineMargin: -1}} {
		if _, err := NewHTTP(cfg); err == nil {
			t.Errorf("NewHTTP(%+v) accepted", cfg)
		}
	}
	if _, err := NewSQS(Config{Engine: eng}, nil); err == nil {
		t.Error("NewSQS(nil handler) accepted")
	}
}

func TestPointer(t *testing.T) {
	doc, _ := decodeJSON([]byte(`{"body":"{\"a\":{\"b/c\":[1,{\"~k\":\"v\"}]}}","n":12345678901234567890}`))
	for ptr, want := range map[string]string{"/body/a/b~1c/1/~0k": "v", "/n": "12345678901234567890"} {
		v, err := MustPointer(ptr).Lookup(doc)
		if err != nil {
			t.Fatalf("%s: %v", ptr, err)
		}
		if s, _ := keyString(v); s != want {
			t.Fatalf("%s = %v, want %s", ptr, v, want)
		}
	}
	for _, ptr := range []string{"/body/x", "/body/a/b~1c/2", "/n/x", "/body/a/b~1c/01"} {
		if _, err := MustPointer(ptr).Lookup(doc); !errors.Is(err, ErrPointer) {
			t.Errorf("%s: %v, want ErrPointer", ptr, err)
		}
	}
}
