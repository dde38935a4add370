package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testenv"
)

// TestPausedRedisClaimIsReleased: a claim sent while the Redis store is
// paused (SIGSTOP) gets 503 "not run"; once Redis resumes — past
// --finish-timeout — it executes the claim still queued on the closed
// connection. The proxy spooled the abandoned attempt and releases that
// claim, so the client's retry runs the effect once, instead of meeting a
// claim nobody owns (409, then outcome-unknown after the lease).
func TestPausedRedisClaimIsReleased(t *testing.T) {
	t.Parallel()
	url, proc := testenv.StartRedisProcess(t, "--appendonly", "yes", "--appendfsync", "always")
	var effects atomic.Int64
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		effects.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"paid":true}`))
	})
	spool := filepath.Join(t.TempDir(), "spool")
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", url+"?read_timeout=300ms&write_timeout=300ms",
		"--spool", spool, "--finish-timeout", "500ms", "--lease", "30s", "--in-flight", "reject", "--admin", "127.0.0.1:0")
	// First-time traffic: the store's claims go straight to the write
	// (no read first), so the claim sent while paused is a write that is
	// queued, and lands on resume.
	for i := range 8 {
		if r := send(t, "POST", p.url("/charges"), fmt.Sprintf(`"warm-%d"`, i), `{"amount":1}`); r.status != http.StatusCreated {
			t.Fatalf("warm-up: %d %s", r.status, r.body)
		}
	}
	effects.Store(0)
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r := send(t, "POST", p.url("/charges"), `"paused-1"`, `{"amount":5}`)
	if r.status != http.StatusServiceUnavailable {
		_ = proc.Signal(syscall.SIGCONT)
		t.Fatalf("claim while the store is paused: %d %s, want 503", r.status, r.body)
	}
	time.Sleep(1500 * time.Millisecond) // well past --finish-timeout
	if h := healthz(t, p); !strings.HasPrefix(h, "degraded\n") && !strings.HasPrefix(h, "store unavailable\n") {
		t.Errorf("/healthz while the abandoned claim is spooled: %q, want degraded (or store unavailable)", h)
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the resumed server runs the queued claim
	deadline := time.Now().Add(15 * time.Second)
	for {
		r = send(t, "POST", p.url("/charges"), `"paused-1"`, `{"amount":5}`)
		if r.status == http.StatusCreated {
			break
		}
		if r.status != http.StatusConflict && r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("retry after the store resumed: %d %s\n%s", r.status, r.body, p.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := effects.Load(); n != 1 {
		t.Fatalf("the upstream ran %d effects, want 1", n)
	}
	if !strings.Contains(p.logs(), "abandoned claim settled") {
		t.Fatalf("the proxy did not settle the abandoned claim:\n%s", p.logs())
	}
}

// TestSpoolOfAnotherStoreRefused: a spool directory one proxy's store
// owns is refused, naming both stores, by a proxy on another store.
func TestSpoolOfAnotherStoreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	a := "sqlite://" + filepath.Join(dir, "a.db")
	b := "sqlite://" + filepath.Join(dir, "b.db")
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", a, "--spool", spool)
	cmd := exec.Command(idemBin, "proxy", "--listen", "127.0.0.1:0", "--global-scope", "--upstream", up.URL, "--store", b, "--spool", spool)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("second proxy on another store: %v, want exit 2\n%s", err, out)
	}
	for _, want := range []string{"belongs to store sqlite://" + filepath.Join(dir, "a.db"), "sqlite://" + filepath.Join(dir, "b.db"), "its own --spool"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	_ = p
}

// TestPausedPostgresAnswers503: the PostgreSQL server stops answering
// without closing the connection (its link, through a relay the test
// controls, stalls: a paused server or a silent partition). A request
// gets 503 "not run" within about call_timeout instead of hanging for as
// long as TCP keeps the connection, the upstream sees nothing, and once
// the server answers the retry runs the effect once.
func TestPausedPostgresAnswers503(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres.Need(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("idem_paused_%d", time.Now().UnixNano())
	t.Cleanup(func() { pgExec(t, dsn, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	relay := testenv.StartRelay(t, u.Host)
	u.Host = relay.Addr()
	q := u.Query()
	q.Set("schema", schema)
	q.Set("call_timeout", "1s")
	q.Set("notify", "false")
	u.RawQuery = q.Encode()
	var effects atomic.Int64
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		effects.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", u.String(), "--spool", filepath.Join(t.TempDir(), "spool"),
		"--finish-timeout", "1s", "--in-flight", "reject")
	if r := send(t, "POST", p.url("/charges"), `"warm"`, `{"amount":1}`); r.status != http.StatusCreated {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	effects.Store(0)
	relay.Stall()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url("/charges"), strings.NewReader(`{"amount":5}`))
	req.Header.Set("Idempotency-Key", `"paused-pg"`)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a request while PostgreSQL does not answer: no answer after %s (%v); want 503 within a few seconds", time.Since(start), err)
	}
	res.Body.Close()
	r := resp{status: res.StatusCode}
	if el := time.Since(start); r.status != http.StatusServiceUnavailable || el > 8*time.Second {
		t.Fatalf("a request while PostgreSQL does not answer: %d after %s, want 503 within a few seconds\n%s", r.status, el, r.body)
	}
	if n := effects.Load(); n != 0 {
		t.Fatalf("the upstream ran %d effects while the store did not answer", n)
	}
	relay.Resume()
	relay.Cut()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = send(t, "POST", p.url("/charges"), `"paused-pg"`, `{"amount":5}`)
		if r.status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry after the store answers: %d %s\n%s", r.status, r.body, p.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := effects.Load(); n != 1 {
		t.Fatalf("the upstream ran %d effects, want 1", n)
	}
}
