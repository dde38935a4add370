package audit

import (
	"context"
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

// auditBody is the audited request's body.
const auditBody = `{"amount":100,"currency":"EUR","order":"42"}`

// runAudit audits url with o, as idem audit does with its defaults for
// the flags o leaves zero.
func runAudit(t *testing.T, url string, o Options) (*Report, error) {
	t.Helper()
	o.Sandbox = true
	if o.Method == "" {
		o.Method = http.MethodPost
	}
	if o.BodyJSON == "" {
		o.BodyJSON = auditBody
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.MaxRequests == 0 {
		o.MaxRequests = 500
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	a, err := New(url, o)
	if err != nil {
		t.Fatal(err)
	}
	return a.Run(context.Background())
}

func failedChecks(rep *Report) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Result == "fail" {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestAuditFindsBrokenServers: each server gets one thing wrong, and the
// audit fails exactly the checks that see it.
func TestAuditFindsBrokenServers(t *testing.T) {
	t.Parallel()
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
			rep, err := runAudit(t, srv.URL+"/charges", Options{Headers: []string{"Authorization=Bearer a"}, EffectsURL: srv.URL + "/effects",
				RequireKey: true, AsA: "Authorization=Bearer a", AsB: "Authorization=Bearer b", TTL: 2 * time.Second, Slow: true})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.WriteText(&out)
			if rep.Passed != (tc.want == nil) {
				t.Fatalf("passed %v, want %v\n%s", rep.Passed, tc.want == nil, out.String())
			}
			if got := failedChecks(rep); !slices.Equal(got, tc.want) {
				t.Fatalf("failed checks %v, want %v\n%s", got, tc.want, out.String())
			}
		})
	}
}

// TestWriteText: the table names the failed check and why, and the verdict
// counts the requests.
func TestWriteText(t *testing.T) {
	t.Parallel()
	s := &flawedServer{flaw: noFingerprint, recs: map[string]*auditRec{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	rep, err := runAudit(t, srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.WriteText(&out)
	for _, want := range []string{`CHECK +RESULT +DETAIL`, `\ndivergence +fail +the key reused`, `got the first request's answer`, `\nretention +skip`, `some checks failed; \d+ requests sent`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRequestBudget: the audit never sends more than MaxRequests, and
// says which checks it skipped for it.
func TestRequestBudget(t *testing.T) {
	t.Parallel()
	s := &flawedServer{recs: map[string]*auditRec{}}
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	rep, err := runAudit(t, srv.URL, Options{MaxRequests: 7, EffectsURL: srv.URL + "/effects"})
	if err != nil || !rep.Passed {
		t.Fatalf("%+v, %v", rep, err)
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
		t.Fatalf("no check was skipped for the budget: %+v", rep.Checks)
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
