package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/cardprovider"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/httpprovider"
	"github.com/idemkit/idem/sqlitestore"
)

// binary is the payments server built by TestMain for the crash test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "payments-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "payments")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build payments: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// startServer runs the payments binary on db and returns it with its URL.
func startServer(t *testing.T, db, provider string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(binary, "--listen", "127.0.0.1:0", "--store", db, "--provider", provider,
		"--lease", "30s", "--recover-every", "1h", "--reconcile-every", "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "payments: listening on ")
	if err != nil || !ok {
		t.Fatalf("server did not start: %q, %v", line, err)
	}
	return cmd, addr
}

// TestCrashBetweenProviderAndOutcome kills the server (SIGKILL) while its
// charge is at the provider, before the outcome is written. The provider
// applies the charge after the kill. After a restart, a retry cannot charge
// again, reconciliation records the provider's result, and the retry then
// replays it: one provider call in all.
func TestCrashBetweenProviderAndOutcome(t *testing.T) {
	db := filepath.Join(t.TempDir(), "pay.db")
	prov := cardprovider.New()
	release := prov.Hold()
	psrv := httptest.NewServer(prov.Handler())
	t.Cleanup(psrv.Close)
	t.Cleanup(release)

	srv1, base1 := startServer(t, db, psrv.URL)
	go func() { _, _ = (client{t: t, base: base1}).post("charge", "crash-1", 4200) }() // its answer dies with the server
	fwd := "charge:v1:demo:crash-1"
	select {
	case k := <-prov.Arrived():
		if k != fwd {
			t.Fatalf("provider got key %q, want %q", k, fwd)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the charge never reached the provider")
	}
	if err := srv1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = srv1.Wait()
	release() // the provider applies the charge; nobody hears the answer
	prov.Wait()

	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, db, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if r, err := st.Get(ctx, "demo", "charge:v1:crash-1"); err != nil || r.State != idem.StateInProgress {
		t.Fatalf("after the kill: %+v, %v; want the claim left in_progress", r, err)
	}

	_, base2 := startServer(t, db, psrv.URL)
	c := client{t: t, base: base2}
	if code, body := c.post("charge", "crash-1", 4200); code != http.StatusConflict {
		t.Fatalf("retry after restart: %d %s; want 409 while the dead attempt's lease runs", code, body)
	}

	// Reconcile as a later run would: past the lease and the window.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	eng, err := idem.New(st, idem.Config{Clock: later})
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := httpprovider.New(httpprovider.Config{URLTemplate: psrv.URL + "/entries/{key}", ListURL: psrv.URL + "/entries"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reconcile.New(eng, lookup, reconcile.Config{SettlementWindow: time.Minute,
		Result: func(a reconcile.Applied) ([]byte, error) { return a.Result, nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(ctx)
	if err != nil || strings.Join(rep.Keys[reconcile.ClassUnderCounted], ",") != "charge:v1:crash-1" || !rep.Clean() {
		t.Fatalf("reconciliation: %+v, %v", rep, err)
	}

	code, body := c.post("charge", "crash-1", 4200)
	if code != http.StatusCreated || !strings.Contains(string(body), `"key":"`+fwd+`"`) {
		t.Fatalf("retry after reconciliation: %d %s; want the provider's charge replayed", code, body)
	}
	if calls, apps := prov.Calls(fwd), prov.Applications()[fwd]; calls != 1 || apps != 1 {
		t.Fatalf("provider calls %d, applications %d; want 1 and 1", calls, apps)
	}
}
