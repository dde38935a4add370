package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// droppingUpstream answers every request on a connection but drops the
// connection, after reading it in full, on the request whose path is
// dropPath: the keep-alive connection that breaks after the request was
// written, on which Go's transport resends a request it deems replayable.
type droppingUpstream struct {
	ln       net.Listener
	dropPath string
	mu       sync.Mutex
	arrivals map[string]int
	keys     map[string][]string
}

func newDroppingUpstream(t *testing.T, dropPath string) *droppingUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &droppingUpstream{ln: ln, dropPath: dropPath, arrivals: map[string]int{}, keys: map[string][]string{}}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *droppingUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for served := 0; ; served++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		u.mu.Lock()
		u.arrivals[req.URL.Path]++
		u.keys[req.URL.Path] = append(u.keys[req.URL.Path], req.Header.Get("Idempotency-Key"))
		u.mu.Unlock()
		if req.URL.Path == u.dropPath && served > 0 {
			return // a reused connection breaks after the request was written
		}
		_, _ = c.Write([]byte("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"))
	}
}

func (u *droppingUpstream) seen(path string) (int, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.arrivals[path], append([]string(nil), u.keys[path]...)
}

// TestProxyForwardKeyNeverResent: with --forward-key the upstream sees the
// intent's key, and a keep-alive connection that drops after the request
// was written does not make Go's transport send the request again (it
// would for a request carrying the canonical Idempotency-Key header): one
// arrival, and the outcome is unknown, not a second charge.
func TestProxyForwardKeyNeverResent(t *testing.T) {
	t.Parallel()
	up := newDroppingUpstream(t, "/charges")
	p := startProxy(t, "--global-scope", "--upstream", "http://"+up.ln.Addr().String(), "--store", "memory://")
	// Warm a keep-alive connection to the upstream.
	if r := send(t, "POST", p.url("/warm"), `"w-1"`, `{}`); r.status != http.StatusCreated {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	// An empty body: with the canonical header name the transport would
	// deem it replayable (a body it can send again) and resend it.
	r := send(t, "POST", p.url("/charges"), `"order-42"`, "")
	n, keys := up.seen("/charges")
	if n != 1 {
		t.Fatalf("the upstream saw the request %d times, want once (a dropped keep-alive connection must not resend it)", n)
	}
	if keys[0] != `"order-42"` {
		t.Fatalf("the upstream saw Idempotency-Key %q, want the intent's key", keys[0])
	}
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("answer %d %s; want 504 (sent, no answer: unknown)", r.status, r.body)
	}
}

// TestProxyIntentAndRecordedHeaders: --intent reads business fields from
// the JSON body into the record's intent, the intent always names the
// method and path, and --record-header extends what a replay repeats.
func TestProxyIntentAndRecordedHeaders(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Charge-Id", "ch_1")
		w.WriteHeader(http.StatusCreated)
	})
	dsn := "sqlite://" + t.TempDir() + "/idem.db"
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--record-header", "X-Charge-Id",
		"--intent", "amount=/amount", "--intent", "currency=/currency", "--intent", "customer=/customer/id")
	body := `{"amount": 1250, "currency": "eur", "customer": {"id": "cus_7"}}`
	send(t, "POST", p.url("/v1/charges"), `"order-42"`, body)
	r := send(t, "POST", p.url("/v1/charges"), `"order-42"`, body)
	if r.header.Get("Idempotent-Replayed") != "true" || r.header.Get("X-Charge-Id") != "ch_1" {
		t.Fatalf("replay headers %v; want Idempotent-Replayed and the recorded X-Charge-Id", r.header)
	}
	out, err := exec.Command(idemBin, "get", "order-42", "--store", dsn, "--json").Output()
	if err != nil {
		t.Fatalf("idem get: %v", err)
	}
	var rec struct {
		Intent struct {
			Amount   int64             `json:"amount"`
			Currency string            `json:"currency"`
			Fields   map[string]string `json:"fields"`
		} `json:"intent"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	in := rec.Intent
	if in.Amount != 1250 || in.Currency != "EUR" || in.Fields["customer"] != "cus_7" || in.Fields["method"] != "POST" || in.Fields["path"] != "/v1/charges" {
		t.Fatalf("intent = %+v; want amount 1250 EUR, customer cus_7, method POST, path /v1/charges", in)
	}
	out, _ = exec.Command(idemBin, "list", "--store", dsn).Output()
	if !strings.Contains(string(out), "/v1/charges") || !strings.Contains(string(out), "12.50 EUR") {
		t.Fatalf("idem list does not show method, path and amount (12.50 EUR):\n%s", out)
	}
}
