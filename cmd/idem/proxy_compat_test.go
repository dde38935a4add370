package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowCharges answers /charges after d, with a charge.
func slowCharges(d time.Duration) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	}
}

// duplicates sends two requests with one key, the second while the first
// is with the upstream.
func duplicates(t *testing.T, p *proc, up *upstream) (first, second resp) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { first = send(t, "POST", p.url("/charges"), `"d"`, `{"amount":1}`) })
	<-up.arrived
	second = send(t, "POST", p.url("/charges"), `"d"`, `{"amount":1}`)
	wg.Wait()
	return first, second
}

// TestProxyWaitsForDuplicatesByDefault: without --in-flight, a duplicate
// that arrives while the first request is with the upstream waits for it
// and gets its response replayed — what an SDK that retries on its own
// timeout (and never retries a 409 error body, as stripe-go) needs.
func TestProxyWaitsForDuplicatesByDefault(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, slowCharges(400*time.Millisecond))
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://")
	a, b := duplicates(t, p, up)
	wantCode(t, a, 201, "")
	wantCode(t, b, 201, "")
	if b.body != `{"id":"ch_1"}` || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the waiting duplicate got %q, replayed=%q", b.body, b.header.Get("Idempotent-Replayed"))
	}
	if n := up.count("/charges"); n != 1 {
		t.Fatalf("upstream saw %d requests, want 1", n)
	}
	if log := p.logs(); !strings.Contains(log, "in_flight=wait wait=1m5s") {
		t.Errorf("the start-up line does not say in_flight=wait wait=1m5s (--upstream-timeout 60s plus 5s): %s", log)
	}
}

// TestProxyInFlightRejectAndWaitBound: --in-flight reject still answers a
// duplicate 409 at once, and a wait past --wait ends in 409 too; both
// carry Retry-After (waiting does resolve an in-flight request).
func TestProxyInFlightRejectAndWaitBound(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--in-flight", "reject"}, {"--wait", "100ms"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			up := newTestUpstream(t, slowCharges(time.Second))
			p := startProxy(t, append([]string{"--global-scope", "--upstream", up.URL, "--store", "memory://"}, args...)...)
			a, b := duplicates(t, p, up)
			wantCode(t, a, 201, "")
			wantCode(t, b, 409, "in-flight")
			if b.header.Get("Retry-After") == "" {
				t.Fatal("in-flight 409 without Retry-After")
			}
			if n := up.count("/charges"); n != 1 {
				t.Fatalf("upstream saw %d requests, want 1", n)
			}
		})
	}
}

// TestProxyCompatStripe: --compat stripe answers a reused key as Stripe
// does (400 idempotency_error), puts a Request-Id on problems, and
// releases an upstream 400 (a validation failure) so that the fixed
// request runs with the same key; --release-status still overrides it.
func TestProxyCompatStripe(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("amount") == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"Missing required param: amount."}}`))
			return
		}
		w.Header().Set("Stripe-Version", "2025-01-27.acacia")
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	})
	form := func(p *proc, key, body string) resp {
		return send(t, "POST", p.url("/v1/charges"), key, body, "Content-Type", "application/x-www-form-urlencoded", "X-User-Id", "acct_1")
	}
	// Scoped by principal, so that a 422 names the changed field.
	p := startProxy(t, "--scope-header", "X-User-Id", "--upstream", up.URL, "--store", "memory://", "--compat", "stripe")
	wantCode(t, form(p, "k1", "currency=usd"), 400, "")
	wantCode(t, form(p, "k1", "currency=usd&amount=100"), 200, "")
	if n := up.count("/v1/charges"); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2: the 400 was not released", n)
	}
	replay := form(p, "k1", "amount=100&currency=usd")
	if replay.header.Get("Idempotent-Replayed") != "true" || replay.header.Get("Stripe-Version") != "2025-01-27.acacia" ||
		replay.header.Get("Idempotency-Key") != "k1" || !strings.HasPrefix(replay.header.Get("Request-Id"), "req_") {
		t.Fatalf("replay headers %v", replay.header)
	}
	mm := form(p, "k1", "amount=200&currency=usd")
	wantCode(t, mm, 400, "key-mismatch")
	var body struct {
		Error struct{ Type, Code, Param string }
	}
	if err := json.Unmarshal([]byte(mm.body), &body); err != nil || body.Error.Type != "idempotency_error" || body.Error.Param != "amount" {
		t.Fatalf("mismatch body %s (%v)", mm.body, err)
	}
	if !strings.HasPrefix(mm.header.Get("Request-Id"), "req_") {
		t.Fatalf("mismatch without Request-Id: %v", mm.header)
	}

	for _, release := range []string{"429", ""} {
		q := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://", "--compat", "stripe", "--release-status", release)
		wantCode(t, form(q, "k2", "currency=usd"), 400, "")
		if r := form(q, "k2", "currency=usd"); r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("with --release-status %q the upstream's 400 was released", release)
		}
	}
}

func TestProxyCompatFlagErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"proxy", "--global-scope", "--upstream", "http://x", "--compat", "paypal"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--wait", "-1s"},
	} {
		if _, e, code := runCLI(args...); code != exitUsage || !strings.Contains(e, args[len(args)-2]) {
			t.Errorf("%v: code %d, stderr %q; want 2 naming the flag", args, code, e)
		}
	}
}

// TestProxyWaitDefault: the wait bound is the first request's own bound
// (--upstream-timeout plus the 5s to record its outcome) unless --wait
// says otherwise, as the start-up line reports.
func TestProxyWaitDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream-timeout", "2s"}, "in_flight=wait wait=7s"},
		{[]string{"--upstream-timeout", "0"}, "in_flight=wait wait=1m0s"},
		{[]string{"--wait", "3s"}, "in_flight=wait wait=3s"},
		{[]string{"--in-flight", "reject"}, "in_flight=reject"},
	} {
		p := startProxy(t, append([]string{"--global-scope", "--upstream", "http://127.0.0.1:1", "--store", "memory://"}, c.args...)...)
		if log := p.logs(); !strings.Contains(log, c.want) {
			t.Errorf("%v: the start-up line does not say %q:\n%s", c.args, c.want, log)
		}
	}
}
