package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/audit"
)

const auditBody = `{"amount":100,"currency":"EUR","order":"42"}`

// runAudit runs idem audit and decodes its JSON report.
func runAudit(t *testing.T, args ...string) (audit.Report, int, string) {
	t.Helper()
	stdout, stderr, code := cli(t, append([]string{"audit", "--sandbox", "--json"}, args...)...)
	var rep audit.Report
	if code == exitOK || code == exitFindings {
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("report is not JSON: %v\n%s\n%s", err, stdout, stderr)
		}
	}
	return rep, code, stdout + stderr
}

// chargeUpstream is the API behind the proxy: POST /charges makes a charge
// (slowly enough for duplicates to overlap), GET /effects counts them.
func chargeUpstream(t *testing.T) *upstream {
	var charges atomic.Int64
	return newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/effects" {
			fmt.Fprint(w, charges.Load())
			return
		}
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"for":%q}`, charges.Add(1), r.Header.Get("X-User-Id"))
	})
}

// TestAuditPassesIdemProxy: idem proxy in front of the auditor's own
// fixture upstream (--fixture) passes every check, effects counted.
func TestAuditPassesIdemProxy(t *testing.T) {
	fixture := closedAddr(t)
	p := startProxy(t, "--upstream", "http://"+fixture, "--store", "memory://", "--require-key", "--scope-header", "X-User-Id")
	rep, code, out := runAudit(t, p.url(""), "--path", "/charges", "--body-json", auditBody,
		"--header", "X-User-Id=a", "--fixture", fixture, "--require-key",
		"--as-a", "X-User-Id=a", "--as-b", "X-User-Id=b", "--ttl", "2s", "--slow")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, out)
	}
	for _, c := range rep.Checks {
		if c.Result != "pass" {
			t.Errorf("%s: %s (%s)", c.Name, c.Result, c.Detail)
		}
	}
	if rep.EffectsSource != "fixture" || rep.Inconclusive != 0 || !rep.Passed {
		t.Errorf("effects source %q, %d inconclusive, passed %v; want fixture, 0, true", rep.EffectsSource, rep.Inconclusive, rep.Passed)
	}
	if rep.Requests > 500 {
		t.Errorf("sent %d requests, over the default budget", rep.Requests)
	}
}

// TestAuditPassesIdemProxyCountedByURL: the same, the effects read from the
// upstream's own count through --effects-url.
func TestAuditPassesIdemProxyCountedByURL(t *testing.T) {
	up := chargeUpstream(t)
	p := startProxy(t, "--upstream", up.URL, "--store", "memory://", "--scope-header", "X-User-Id")
	rep, code, out := runAudit(t, p.url(""), "--path", "/charges", "--body-json", auditBody,
		"--header", "X-User-Id=a", "--effects-url", up.URL+"/effects", "--as-a", "X-User-Id=a", "--as-b", "X-User-Id=b")
	if code != exitOK || rep.EffectsSource != "effects-url" || rep.Inconclusive != 0 {
		t.Fatalf("exit %d, effects source %q, %d inconclusive; want 0, effects-url, 0\n%s", code, rep.EffectsSource, rep.Inconclusive, out)
	}
}

// TestAuditFailsNoIdempotency: an API without any idempotency — 16 charges
// for 16 concurrent requests, every answer 2xx — fails replay, concurrency
// and in-flight (exit 3), with the effects counted and without.
func TestAuditFailsNoIdempotency(t *testing.T) {
	up := chargeUpstream(t) // every request is a charge
	for _, counted := range []bool{true, false} {
		args := []string{up.URL + "/charges", "--body-json", auditBody}
		if counted {
			args = append(args, "--effects-url", up.URL+"/effects")
		}
		rep, code, out := runAudit(t, args...)
		if code != exitFindings || rep.Passed {
			t.Fatalf("counted %v: exit %d, passed %v; want 3, false\n%s", counted, code, rep.Passed, out)
		}
		results := map[string]string{}
		for _, c := range rep.Checks {
			results[c.Name] = c.Result
		}
		for _, name := range []string{"replay", "concurrency", "in-flight"} {
			if results[name] != "fail" {
				t.Errorf("counted %v: %s %s, want fail\n%s", counted, name, results[name], out)
			}
		}
	}
}

// TestAuditTable: without --json the report card is a table and a verdict;
// without a count, the checks resting on a repeated answer are
// inconclusive, and the card says effects were not counted.
func TestAuditTable(t *testing.T) {
	up := chargeUpstream(t)
	p := startProxy(t, "--upstream", up.URL, "--store", "memory://", "--scope-header", "X-User-Id")
	stdout, _, code := cli(t, "audit", p.url("/charges"), "--sandbox", "--body-json", auditBody, "--header", "X-User-Id=a")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, stdout)
	}
	for _, want := range []string{`CHECK +RESULT +DETAIL`, `\nreplay +inconclusive +second answer repeats the first \(201, Idempotent-Replayed: true\); effects not counted`,
		`\nkey-limits +pass`, `\nretention +skip`, `\neffects: not counted`, `no check failed, 4 inconclusive; \d+ requests sent`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestAuditUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http://127.0.0.1:1"}, "refusing to start without --sandbox"},
		{[]string{"--sandbox"}, "missing URL"},
		{[]string{"--sandbox", "ftp://x"}, "not an http(s) URL"},
		{[]string{"--sandbox", "http://x", "--method", "GET"}, "not a mutating method"},
		{[]string{"--sandbox", "http://x", "--body-json", "{"}, "not valid JSON"},
		{[]string{"--sandbox", "http://x", "--as-a", "A=1"}, "go together"},
		{[]string{"--sandbox", "http://x", "--header", "bad header"}, "want NAME=VALUE"},
		{[]string{"--sandbox", "http://x", "--slow"}, "--slow needs --ttl"},
		{[]string{"--sandbox", "http://x", "--concurrency", "1"}, "at least 2"},
		{[]string{"--sandbox", "http://x", "--effects-metric", "charges_total"}, "--effects-metric needs --effects-url"},
		{[]string{"--sandbox", "http://x", "--effects-url", "http://x/n", "--effects-metric", "a b"}, "not a metric name"},
		{[]string{"--sandbox", "http://x", "--effects-url", "http://x/n", "--fixture", "127.0.0.1:0"}, "exclusive"},
	} {
		_, stderr, code := cli(t, append([]string{"audit"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != exitUsage || len(lines) != 2 || !strings.Contains(lines[0], tc.want) || lines[1] != "Run 'idem audit --help' for usage." {
			t.Errorf("%v: exit %d, stderr %q; want 2, one line with %q and the help hint", tc.args, code, stderr, tc.want)
		}
	}
	stdout, _, code := cli(t, "audit", "--help")
	if code != exitOK || !strings.Contains(stdout, "--sandbox") || !strings.Contains(stdout, "--effects-url URL") || !strings.Contains(stdout, "--fixture ADDR") {
		t.Errorf("--help: exit %d\n%s", code, stdout)
	}
}

func TestAuditCouldNotRun(t *testing.T) {
	_, stderr, code := cli(t, "audit", "--sandbox", "http://"+closedAddr(t))
	if code != exitFailure || !strings.Contains(stderr, "could not run") {
		t.Fatalf("exit %d, stderr %q; want 1 and \"could not run\"", code, stderr)
	}
	// --fixture on an address already taken: the fixture cannot serve, so
	// nothing could be counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code = cli(t, "audit", "--sandbox", "http://"+closedAddr(t), "--fixture", ln.Addr().String())
	if code != exitFailure || !strings.Contains(stderr, "--fixture") {
		t.Fatalf("exit %d, stderr %q; want 1 and --fixture", code, stderr)
	}
	// A request that does not succeed is not a finding: nothing was audited.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer srv.Close()
	_, stderr, code = cli(t, "audit", "--sandbox", srv.URL)
	if code != exitFailure || !strings.Contains(stderr, "needs a --method") {
		t.Fatalf("exit %d, stderr %q; want 1 and the advice", code, stderr)
	}
}
