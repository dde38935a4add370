package main

import (
	"errors"
	"fmt"
	"net/http"
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
