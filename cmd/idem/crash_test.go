package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProxyKill9 kills the proxy while the upstream applies an effect,
// restarts it and retries: the upstream must have seen exactly one request,
// the retry gets 409, the record is listed as unknown, and an operator's
// release lets exactly one more retry through.
func TestProxyKill9(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	up, p2 := killMidEffect(t, db, "/pay", `"pay-1"`, `{"amount":5000}`, `{"paid":true}`)
	if n := up.count("/pay"); n != 1 {
		t.Fatalf("upstream saw %d requests, want exactly 1", n)
	}
	out, errOut, code := cli(t, "list", "--store", db, "--state", "unknown")
	if code != 0 || !strings.Contains(out, "pay-1") {
		t.Fatalf("idem list --state unknown: code %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cli(t, "resolve", "pay-1", "--store", db, "--as", "released", "--reason", "provider has no trace of it", "--actor", "test")
	if code != 0 || !strings.Contains(errOut, "provider has no trace of it") || !strings.Contains(errOut, "actor=test") {
		t.Fatalf("idem resolve: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// The next retry goes through once; the one after replays.
	wantCode(t, send(t, "POST", p2.url("/pay"), `"pay-1"`, `{"amount":5000}`), 201, "")
	r := send(t, "POST", p2.url("/pay"), `"pay-1"`, `{"amount":5000}`)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second retry after release: %d, replayed %q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if n := up.count("/pay"); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (the lost one and the released retry)", n)
	}
	// A decided record is not changed without --force.
	if _, _, code := cli(t, "resolve", "pay-1", "--store", db, "--as", "released", "--reason", "again"); code != exitFailure {
		t.Fatalf("resolve of a succeeded record without --force: code %d, want 1", code)
	}
}

// killMidEffect starts a proxy on db and sends it a request with key and
// body; the proxy is killed (-9) while the upstream applies it. It then
// restarts the proxy and retries until the record is unknown (409
// outcome-unknown; in flight until the dead attempt's lease passes), and
// returns the upstream, which answers 201 with answer from then on, and the
// restarted proxy.
// Further proxy flags may follow (both proxies get them).
func killMidEffect(t *testing.T, db, path, key, body, answer string, proxyArgs ...string) (*upstream, *proc) {
	t.Helper()
	hold := make(chan struct{})
	var blocking atomic.Bool
	blocking.Store(true)
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if blocking.Load() {
			<-hold // the effect is being applied when the proxy dies
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(answer))
	})
	t.Cleanup(func() { close(hold) })
	p1 := startProxy(t, append([]string{"--global-scope", "--upstream", up.URL, "--store", db, "--lease", "1s"}, proxyArgs...)...)
	sent := make(chan error, 1)
	go func() {
		_, err := trySend("POST", p1.url(path), key, body)
		sent <- err
	}()
	<-up.arrived
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p1.done
	if err := <-sent; err == nil {
		t.Fatal("the client got an answer from a killed proxy")
	}
	blocking.Store(false)

	p2 := startProxy(t, append([]string{"--global-scope", "--upstream", up.URL, "--store", db, "--lease", "1s"}, proxyArgs...)...)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := send(t, "POST", p2.url(path), key, body)
		if r.status != http.StatusConflict {
			t.Fatalf("retry after the crash: %d %s; want 409", r.status, r.body)
		}
		if strings.Contains(r.body, "#outcome-unknown") {
			return up, p2
		}
		if time.Now().After(deadline) {
			t.Fatalf("record never became unknown: %s", r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProxyGracefulShutdown sends SIGTERM while a request is at the
// upstream: the request finishes, its response is recorded, and the proxy
// exits 0.
func TestProxyGracefulShutdown(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	hold := make(chan struct{})
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-hold
		w.WriteHeader(http.StatusCreated)
	})
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", db)
	got := make(chan resp, 1)
	go func() { got <- send(t, "POST", p.url("/slow"), `"g-1"`, `{}`) }()
	<-up.arrived
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.logs(), "shutting down") {
		time.Sleep(10 * time.Millisecond)
	}
	close(hold)
	if r := <-got; r.status != http.StatusCreated {
		t.Fatalf("in-flight request during shutdown: %d %s", r.status, r.body)
	}
	if err := <-p.done; err != nil {
		t.Fatalf("proxy exit: %v\n%s", err, p.logs())
	}
	out, errOut, code := cli(t, "get", "g-1", "--store", db, "--json")
	if code != 0 || !strings.Contains(out, `"state": "succeeded"`) || !strings.Contains(out, `"http_status": 201`) {
		t.Fatalf("idem get after shutdown: code %d\n%s%s", code, out, errOut)
	}
}
