package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/testenv"
)

// TestCLIRefusesAsynchronousReplication runs the built binary against a
// PostgreSQL primary with a streaming standby the test starts: with the
// standby asynchronous, idem doctor exits 3 naming asynchronous
// replication (--json too) and idem proxy refuses to start (exit 2)
// unless --allow-async-replication, with which it starts, logs the
// refusal it overrode and exports idem_store_replication_safe 0. With the
// standby synchronous and replicated_claims=on, doctor is healthy and the
// gauge is 1.
func TestCLIRefusesAsynchronousReplication(t *testing.T) {
	t.Parallel()
	primary := testenv.StartPostgres(t, "synchronous_commit=local")
	primary.StartStandby(t, primary.Addr(), "s1")
	waitStandby(t, primary.DSN(), "async")
	dsn := primary.DSN()

	out, errs, code := cli(t, "doctor", "--store", dsn)
	t.Logf("idem doctor, asynchronous standby:\n%s", out)
	if code != exitFindings || !strings.Contains(out, "REFUSE   replication") || !strings.Contains(out, "asynchronous replication") ||
		!strings.Contains(out, "replicated_claims=on") {
		t.Fatalf("doctor on an asynchronous standby: exit %d, want 3 naming asynchronous replication\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, "doctor", "--store", dsn, "--json")
	var rep doctorJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitFindings || rep.Verdict != "findings" ||
		!strings.HasPrefix(rep.Replication, "primary with 1 asynchronous standby") {
		t.Fatalf("doctor --json: exit %d, %v\n%s%s", code, err, out, errs)
	}

	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	cmd := exec.Command(idemBin, "proxy", "--listen", "127.0.0.1:0", "--global-scope", "--upstream", up.URL, "--store", dsn, "--spool", "")
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errorsAsExit(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(b), "asynchronous replication") ||
		!strings.Contains(string(b), "--allow-async-replication") {
		t.Fatalf("proxy on an asynchronous standby: %v, want exit 2 naming asynchronous replication\n%s", err, b)
	}
	t.Logf("idem proxy, asynchronous standby:\n%s", b)

	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--spool", "", "--allow-async-replication", "--admin", "127.0.0.1:0")
	if !strings.Contains(p.logs(), "ASYNCHRONOUS REPLICATION") {
		t.Errorf("the proxy started on an asynchronous standby without saying so:\n%s", p.logs())
	}
	if m := send(t, "GET", "http://"+p.admin+"/metrics", "", ""); !strings.Contains(m.body, "idem_store_replication_safe 0") {
		t.Errorf("idem_store_replication_safe is not 0 on an asynchronous standby")
	}

	// Synchronous standby, claims forced to wait for it.
	pgExec(t, dsn, "ALTER SYSTEM SET synchronous_standby_names = 's1'", "SELECT pg_reload_conf()")
	waitStandby(t, dsn, "sync")
	safe := dsn + "&replicated_claims=on"
	out, errs, code = cli(t, "doctor", "--store", safe)
	t.Logf("idem doctor, synchronous standby, replicated_claims=on:\n%s", out)
	if code != exitOK || !strings.Contains(out, "ok       replication primary with 1 synchronous standby") {
		t.Fatalf("doctor on a synchronous standby with replicated claims: exit %d, want 0\n%s%s", code, out, errs)
	}
	p2 := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", safe, "--spool", "", "--admin", "127.0.0.1:0")
	if m := send(t, "GET", "http://"+p2.admin+"/metrics", "", ""); !strings.Contains(m.body, "idem_store_replication_safe 1") {
		t.Errorf("idem_store_replication_safe is not 1 with replicated claims on a synchronous standby")
	}
	if r := send(t, "POST", p2.url("/charges"), `"sync-1"`, `{"amount":5}`); r.status != http.StatusCreated {
		t.Errorf("a charge through the replicated store: %d %s", r.status, r.body)
	}
}

func errorsAsExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// pgExec runs statements on dsn.
func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// waitStandby waits until the primary at dsn reports a standby in state
// (pg_stat_replication.sync_state: async, sync).
func waitStandby(t *testing.T, dsn, state string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			var n int
			err = c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1", state).Scan(&n)
			c.Close(ctx)
			if err == nil && n > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s standby streaming after 30 s (%v)", state, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
