package main

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStalledBodyCutOff: a client that sends its headers and part of its
// body, then stalls, gets 408 after --body-timeout, nothing reaches the
// upstream and nothing is claimed: the same key then runs normally.
func TestStalledBodyCutOff(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://", "--body-timeout", "500ms")
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"stall-1\"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"amount\":")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", res.StatusCode)
	}
	if el := time.Since(start); el < 400*time.Millisecond || el > 5*time.Second {
		t.Fatalf("408 after %s, want about --body-timeout (500ms)", el)
	}
	if n := up.count("/charges"); n != 0 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	r := send(t, "POST", p.url("/charges"), `"stall-1"`, `{"amount":5}`)
	if r.status != http.StatusCreated || strings.Contains(r.header.Get("Idempotent-Replayed"), "true") {
		t.Fatalf("the key after a stalled body: %d %s (it must be free)", r.status, r.body)
	}
}
