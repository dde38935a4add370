package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

const auditBody = `{"amount":100,"currency":"EUR","order":"42"}`

// runAudit runs idem audit and decodes its JSON report.
func runAudit(t *testing.T, args ...string) (Report, int, string) {
	t.Helper()
	stdout, stderr, code := cli(t, append([]string{"audit", "--sandbox", "--json"}, args...)...)
	var rep Report
	if code == exitOK || code == exitFindings {
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("report is not JSON: %v\n%s\n%s", err, stdout, stderr)
		}
	}
	return rep, code, stdout + stderr
}

func failedChecks(rep Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Result == "fail" {
			out = append(out, c.Name)
		}
	}
	return out
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

func TestAuditPassesIdemProxy(t *testing.T) {
	up := chargeUpstream(t)
	p := startProxy(t, "--upstream", up.URL, "--store", "memory://", "--require-key", "--scope-header", "X-User-Id")
	rep, code, out := runAudit(t, p.url(""), "--path", "/charges", "--body-json", auditBody,
		"--header", "X-User-Id=a", "--effects-url", up.URL+"/effects", "--require-key",
		"--as-a", "X-User-Id=a", "--as-b", "X-User-Id=b", "--ttl", "2s", "--slow")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, out)
	}
	for _, c := range rep.Checks {
		if c.Result != "pass" {
			t.Errorf("%s: %s (%s)", c.Name, c.Result, c.Detail)
		}
	}
	if rep.Requests > 500 {
		t.Errorf("sent %d requests, over the default budget", rep.Requests)
	}
}

// flaw is what a broken server gets wrong.
type flaw int

const (
	flawless flaw = iota
	checkThenAct
	noFingerprint
	globalScope
	noReplay     // runs every request again
	optionalKey  // runs a request without a key
	lenientKeys  // accepts empty and overlong keys
	noRetryAfter // refuses a duplicate in flight without Retry-After
	plainErrors  // answers errors as text/plain
	forgetful    // keeps records for 1s
)

// flawedServer keeps idempotency records itself, correctly except for its
// flaw: it requires a key, scopes keys by Authorization, fingerprints the
// canonical body, refuses duplicates in flight with 409 and answers errors
// as problems.
type flawedServer struct {
	flaw    flaw
	mu      sync.Mutex
	recs    map[string]*auditRec
	charges atomic.Int64
}

type auditRec struct {
	fp   string
	done bool
	body string
	at   time.Time
}

func (s *flawedServer) problem(w http.ResponseWriter, status int, typ string) {
	if s.flaw == plainErrors {
		w.Header().Set("Retry-After", "1")
		http.Error(w, typ, status)
		return
	}
	w.Header().Set("Content-Type", idemhttp.ProblemContentType)
	if status == http.StatusConflict && s.flaw != noRetryAfter {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d}`, "https://example.com/"+typ, typ, status)
}

func (s *flawedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, s.charges.Load())
		return
	}
	vals := r.Header.Values(idemhttp.HeaderName)
	if len(vals) == 0 && s.flaw == optionalKey {
		vals = []string{"none"}
	}
	if len(vals) == 0 {
		s.problem(w, http.StatusBadRequest, "key-missing")
		return
	}
	key, err := idemhttp.ParseKeyHeader(vals[0])
	if s.flaw == lenientKeys {
		key, err = idem.Key(vals[0][:min(len(vals[0]), 255)]), nil
	}
	if err != nil || len(vals) > 1 {
		s.problem(w, http.StatusBadRequest, "key-invalid")
		return
	}
	body, _ := io.ReadAll(r.Body)
	c, err := idem.CanonicalJSON(body)
	if err != nil {
		s.problem(w, http.StatusBadRequest, "body-invalid-json")
		return
	}
	fp := string(c)
	if s.flaw == noFingerprint {
		fp = ""
	}
	id := r.Header.Get("Authorization") + "\x00" + string(key)
	if s.flaw == globalScope {
		id = string(key)
	}
	s.mu.Lock()
	rec, ok := s.recs[id]
	if ok && (s.flaw == noReplay && rec.done || s.flaw == forgetful && rec.done && time.Since(rec.at) > time.Second) {
		ok = false
	}
	switch {
	case ok && rec.fp != fp:
		s.mu.Unlock()
		s.problem(w, http.StatusUnprocessableEntity, "key-mismatch")
		return
	case ok && !rec.done && s.flaw != checkThenAct:
		s.mu.Unlock()
		s.problem(w, http.StatusConflict, "in-flight")
		return
	case ok && rec.done:
		s.mu.Unlock()
		w.Header().Set(idemhttp.ReplayedHeader, "true")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, rec.body)
		return
	}
	rec = &auditRec{fp: fp}
	if s.flaw != checkThenAct {
		s.recs[id] = rec // the claim, before the effect
	}
	s.mu.Unlock()
	// The effect takes time. The server that never replays runs again any
	// request arriving after an effect finished, so its effect lasts long
	// enough for all of the concurrency check's burst to arrive while it
	// runs, also under -race on a busy machine (at 50 ms a straggler
	// failed that check in one CI run).
	effect := 50 * time.Millisecond
	if s.flaw == noReplay {
		effect = 500 * time.Millisecond
	}
	time.Sleep(effect)
	out := fmt.Sprintf(`{"id":%d}`, s.charges.Add(1))
	s.mu.Lock()
	rec.done, rec.body, rec.at = true, out, time.Now()
	s.recs[id] = rec
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, out)
}

func TestAuditFindsBrokenServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		flaw flaw
		want []string
	}{
		{"flawless", flawless, nil},
		{"check-then-act", checkThenAct, []string{"concurrency"}},
		{"no-fingerprint", noFingerprint, []string{"divergence"}},
		{"global-scope", globalScope, []string{"scope"}},
		{"no-replay", noReplay, []string{"replay", "divergence", "retention"}},
		{"optional-key", optionalKey, []string{"missing-key"}},
		{"lenient-keys", lenientKeys, []string{"key-limits"}},
		{"no-retry-after", noRetryAfter, []string{"in-flight"}},
		{"plain-errors", plainErrors, []string{"problem-format"}},
		{"forgetful", forgetful, []string{"retention"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &flawedServer{flaw: tc.flaw, recs: map[string]*auditRec{}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			rep, code, out := runAudit(t, srv.URL+"/charges", "--body-json", auditBody,
				"--header", "Authorization=Bearer a", "--effects-url", srv.URL+"/effects", "--require-key",
				"--as-a", "Authorization=Bearer a", "--as-b", "Authorization=Bearer b", "--ttl", "2s", "--slow")
			wantCode := exitFindings
			if tc.want == nil {
				wantCode = exitOK
			}
			if code != wantCode {
				t.Fatalf("exit %d, want %d\n%s", code, wantCode, out)
			}
			if got := failedChecks(rep); !slices.Equal(got, tc.want) {
				t.Fatalf("failed checks %v, want %v\n%s", got, tc.want, out)
			}
		})
	}
}

func TestAuditTable(t *testing.T) {
	s := &flawedServer{flaw: noFingerprint, recs: map[string]*auditRec{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	stdout, _, code := cli(t, "audit", srv.URL, "--sandbox", "--body-json", auditBody)
	if code != exitFindings {
		t.Fatalf("exit %d, want 3\n%s", code, stdout)
	}
	for _, want := range []string{`CHECK +RESULT +DETAIL`, `\ndivergence +fail +the key reused`, `got the first request's answer`, `\nretention +skip`, `some checks failed; \d+ requests sent`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestAuditRequestBudget(t *testing.T) {
	s := &flawedServer{recs: map[string]*auditRec{}}
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	rep, code, out := runAudit(t, srv.URL, "--body-json", auditBody, "--max-requests", "7", "--effects-url", srv.URL+"/effects")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if seen.Load() > 7 || rep.Requests > 7 {
		t.Fatalf("sent %d requests (report: %d), want at most 7", seen.Load(), rep.Requests)
	}
	var skipped int
	for _, c := range rep.Checks {
		if c.Result == "skip" && strings.Contains(c.Detail, "budget") {
			skipped++
		}
	}
	if skipped == 0 {
		t.Fatalf("no check was skipped for the budget:\n%s", out)
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
	} {
		_, stderr, code := cli(t, append([]string{"audit"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != exitUsage || len(lines) != 2 || !strings.Contains(lines[0], tc.want) || lines[1] != "Run 'idem audit --help' for usage." {
			t.Errorf("%v: exit %d, stderr %q; want 2, one line with %q and the help hint", tc.args, code, stderr, tc.want)
		}
	}
	stdout, _, code := cli(t, "audit", "--help")
	if code != exitOK || !strings.Contains(stdout, "--sandbox") || !strings.Contains(stdout, "--effects-url URL") {
		t.Errorf("--help: exit %d\n%s", code, stdout)
	}
}

func TestAuditCouldNotRun(t *testing.T) {
	_, stderr, code := cli(t, "audit", "--sandbox", "http://"+closedAddr(t))
	if code != exitFailure || !strings.Contains(stderr, "could not run") {
		t.Fatalf("exit %d, stderr %q; want 1 and \"could not run\"", code, stderr)
	}
	// A request that does not succeed is not a finding: nothing was audited.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer srv.Close()
	_, stderr, code = cli(t, "audit", "--sandbox", srv.URL)
	if code != exitFailure || !strings.Contains(stderr, "needs a --method") {
		t.Fatalf("exit %d, stderr %q; want 1 and the advice", code, stderr)
	}
}
