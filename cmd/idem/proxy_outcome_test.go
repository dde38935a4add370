package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/rawhttp"
)

// The rule these tests hold the proxy to: once an upstream call has
// started, its outcome belongs to the intent, not to the client's
// connection. A client that times out, never reads, resets or half-closes
// changes nothing about what is recorded; only an upstream that does not
// answer in full leaves the outcome unknown.

// metricsHas waits until the proxy's /metrics holds line, failing after a
// bound far above what it takes.
func metricsHas(t *testing.T, p *proc, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := send(t, "GET", "http://"+p.admin+"/metrics", "", "")
		if strings.Contains(m.body, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never held %s:\n%s", line, m.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client whose timeout (1 s) is shorter than the upstream (3 s) leaves;
// the upstream call goes on and its response is recorded, so the retry,
// sent once the upstream finished, replays it byte for byte.
func TestProxyClientTimeoutThenRetryReplays(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		finished := make(chan struct{})
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			defer close(finished)
			time.Sleep(3 * time.Second) // the charge takes its time, whoever waits
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"charge":"ch_1","amount":5000}`))
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--in-flight", "wait", "--wait", "20s")
		req, _ := http.NewRequest("POST", p.url("/x"), strings.NewReader(`{"amount":5000}`))
		req.Header.Set("Idempotency-Key", `"k"`)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := (&http.Client{Timeout: time.Second}).Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the client got %d before its 1 s timeout from a 3 s upstream", resp.StatusCode)
		}
		<-finished
		r := send(t, "POST", p.url("/x"), `"k"`, `{"amount":5000}`)
		wantCode(t, r, http.StatusCreated, "")
		if r.body != `{"charge":"ch_1","amount":5000}` || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %q %v", r.body, r.header)
		}
		if n := up.count("/x"); n != 1 {
			t.Fatalf("upstream saw %d requests, want 1", n)
		}
	})
}

// A client that never reads an 8 MB response and then resets its
// connection: the record is succeeded and a retry replays the response.
func TestProxyUnreadResponseThenReset(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(big)
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--max-response", "16777216", "--admin", "127.0.0.1:0")
		c := rawhttp.Post(t, p.addr, "/x", `"k"`, `{}`, -1)
		metricsHas(t, p, `idem_requests_total{operation="POST",outcome="first"} 1`)
		rawhttp.Reset(t, c)
		r := send(t, "POST", p.url("/x"), `"k"`, `{}`)
		wantCode(t, r, http.StatusOK, "")
		if sha256.Sum256([]byte(r.body)) != sha256.Sum256(big) || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d bytes, %v", len(r.body), r.header)
		}
		if n := up.count("/x"); n != 1 {
			t.Fatalf("upstream saw %d requests, want 1", n)
		}
	})
}

// A client that half-closes its connection before its body arrived in
// full gets request-cancelled (499); nothing is claimed, nothing reaches
// the upstream, and no store error is counted.
func TestProxyHalfCloseBeforeClaim(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--admin", "127.0.0.1:0")
		c := rawhttp.Post(t, p.addr, "/x", `"k"`, `{"amount":`, 40)
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		wantCode(t, resp{res.StatusCode, res.Header, string(b)}, 499, "request-cancelled")
		if n := up.count("/x"); n != 0 {
			t.Fatalf("upstream saw %d requests, want 0", n)
		}
		// Nothing was claimed: the whole request runs.
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{"amount":5000}`), http.StatusCreated, "")
		if n := up.count("/x"); n != 1 {
			t.Fatalf("upstream saw %d requests, want 1", n)
		}
		m := send(t, "GET", "http://"+p.admin+"/metrics", "", "")
		if strings.Contains(m.body, `result="error"`) || strings.Contains(m.body, `outcome="error"`) {
			t.Fatalf("a cancelled request was counted as a store error:\n%s", m.body)
		}
	})
}

// An upstream that sends its response headers and then stalls is past
// --upstream-timeout, which bounds the body too: the client gets a 504
// problem (not a hang, not a truncated 200) and the outcome is unknown.
func TestProxyStalledBodyIsUnknown(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		stalled := make(chan struct{})
		t.Cleanup(func() { close(stalled) })
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"partial":`))
			http.NewResponseController(w).Flush()
			select { // applied; the rest never comes
			case <-stalled:
			case <-r.Context().Done():
			}
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--upstream-timeout", "500ms")
		done := make(chan resp, 1)
		go func() {
			r, err := trySend("POST", p.url("/x"), `"k"`, `{}`)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		select {
		case r := <-done:
			wantCode(t, r, http.StatusGatewayTimeout, "upstream-timeout")
			if !strings.Contains(r.body, "did not arrive in full") {
				t.Errorf("problem does not say the response was cut: %s", r.body)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no answer 15s after an upstream stalled its body with --upstream-timeout 500ms")
		}
		wantRetryUnknown(t, p, up)
	})
}

// A client that resets its connection while the upstream works: the
// upstream call goes on, its response is recorded and replayed, and the
// client's leaving is counted, not turned into unknown.
func TestProxyClientResetDuringUpstream(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		proceed := make(chan struct{})
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			<-proceed
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"refund":"re_1"}`))
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--admin", "127.0.0.1:0", "--in-flight", "wait", "--wait", "20s")
		c := rawhttp.Post(t, p.addr, "/x", `"k"`, `{}`, -1)
		<-up.arrived
		rawhttp.Reset(t, c)
		metricsHas(t, p, `idem_in_flight{operation="POST"} 1`)
		close(proceed)
		metricsHas(t, p, `idem_client_gone_total{operation="POST"} 1`)
		r := send(t, "POST", p.url("/x"), `"k"`, `{}`)
		wantCode(t, r, http.StatusCreated, "")
		if r.body != `{"refund":"re_1"}` || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %q %v", r.body, r.header)
		}
		if n := up.count("/x"); n != 1 {
			t.Fatalf("upstream saw %d requests, want 1", n)
		}
	})
}

// An upstream that answers a protected request with 101 Switching
// Protocols: the outcome is unknown (504, then 409), never an empty 200.
func TestProxyUpstreamSwitchingProtocolsIsUnknown(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
		_, _ = io.Copy(io.Discard, conn) // until the proxy lets go
	})
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://")
	r := send(t, "POST", p.url("/x"), `"k"`, `{}`)
	wantCode(t, r, http.StatusGatewayTimeout, "upstream-timeout")
	if !strings.Contains(r.body, "101") {
		t.Errorf("problem does not name the 101: %s", r.body)
	}
	wantRetryUnknown(t, p, up)
}
