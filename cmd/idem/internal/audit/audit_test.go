package audit

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
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

// checkNames are the checks, in the order the audit runs them.
var checkNames = []string{"replay", "divergence", "concurrency", "in-flight", "missing-key", "key-limits", "scope", "problem-format", "retention"}

// results maps each check to its result: want's "check:result" words
// over base's.
func results(base map[string]string, want string) map[string]string {
	m := maps.Clone(base)
	for w := range strings.FieldsSeq(want) {
		name, res, _ := strings.Cut(w, ":")
		if _, ok := m[name]; !ok {
			panic("no check " + name)
		}
		m[name] = res
	}
	return m
}

var (
	// allPass is a correct API's card with effects counted.
	allPass = results(map[string]string{"replay": "pass", "divergence": "pass", "concurrency": "pass", "in-flight": "pass",
		"missing-key": "pass", "key-limits": "pass", "scope": "pass", "problem-format": "pass", "retention": "pass"}, "")
	// uncountedPass is a correct API's card without an effect count: the
	// checks that rest on a repeated answer cannot be decided.
	uncountedPass = results(allPass, "replay:inconclusive divergence:inconclusive concurrency:inconclusive in-flight:inconclusive retention:inconclusive")
)

func checkResults(rep *Report) map[string]string {
	m := map[string]string{}
	for _, c := range rep.Checks {
		m[c.Name] = c.Result
	}
	return m
}

// assertCard fails t unless rep's checks have exactly the results want,
// Passed and Inconclusive agreeing.
func assertCard(t *testing.T, rep *Report, want map[string]string) {
	t.Helper()
	var out strings.Builder
	rep.WriteText(&out)
	if got := checkResults(rep); !maps.Equal(got, want) {
		var diff []string
		for _, n := range checkNames {
			if got[n] != want[n] {
				diff = append(diff, fmt.Sprintf("%s: %s, want %s", n, got[n], want[n]))
			}
		}
		t.Fatalf("%s\n%s", strings.Join(diff, "\n"), out.String())
	}
	var failed, inconclusive int
	for _, r := range want {
		switch r {
		case "fail":
			failed++
		case "inconclusive":
			inconclusive++
		}
	}
	if rep.Passed != (failed == 0) || rep.Inconclusive != inconclusive {
		t.Fatalf("passed %v, inconclusive %d; want %v, %d\n%s", rep.Passed, rep.Inconclusive, failed == 0, inconclusive, out.String())
	}
}

// TestAuditFindsBrokenServers: each server gets one thing wrong, and the
// audit fails exactly the checks that see it — with the effects counted
// through --effects-url, and without: then a check that only a count can
// decide is inconclusive, never a pass, and one whose answers show the
// mistake still fails.
func TestAuditFindsBrokenServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		flaw               flaw
		counted, uncounted string // results that differ from allPass, uncountedPass
	}{
		{"flawless", flawless, "", ""},
		// The reported false pass: no idempotency at all, 16 charges for
		// 16 concurrent requests, every answer 2xx.
		{"no-idempotency", noIdempotency,
			"replay:fail divergence:fail concurrency:fail in-flight:fail missing-key:fail key-limits:fail problem-format:skip retention:fail",
			"replay:fail divergence:fail concurrency:fail in-flight:fail missing-key:fail key-limits:fail problem-format:skip retention:fail"},
		// The same, answering every request alike: only a count tells.
		{"no-idempotency-alike", noIdempotencyAlike,
			"replay:fail divergence:fail concurrency:fail in-flight:fail missing-key:fail key-limits:fail problem-format:skip retention:fail",
			"divergence:fail missing-key:fail key-limits:fail scope:inconclusive problem-format:skip"},
		{"check-then-act", checkThenAct, "concurrency:fail in-flight:fail", "concurrency:fail in-flight:fail"},
		// Runs the effect for every request, then answers the recorded
		// answer: every answer right, every duplicate an effect.
		{"runs-then-replays", runsThenReplays, "replay:fail divergence:fail concurrency:fail in-flight:fail retention:fail", ""},
		{"replays-other-body", replaysOtherBody, "replay:fail divergence:fail retention:fail", "replay:fail divergence:fail retention:fail"},
		{"no-fingerprint", noFingerprint, "divergence:fail", "divergence:fail"},
		{"global-scope", globalScope, "scope:fail", "scope:fail"},
		{"global-scope-unmarked", globalScopeUnmarked, "scope:fail", "scope:inconclusive"},
		{"lock-only", lockOnly, "replay:fail divergence:fail retention:fail", "replay:fail divergence:fail retention:fail"},
		{"optional-key", optionalKey, "missing-key:fail", "missing-key:fail"},
		{"lenient-keys", lenientKeys, "key-limits:fail", "key-limits:fail"},
		{"no-retry-after", noRetryAfter, "in-flight:fail", "in-flight:fail"},
		{"plain-errors", plainErrors, "problem-format:fail", "problem-format:fail"},
		{"forgetful", forgetful, "retention:fail", "retention:fail"},
	} {
		for _, counted := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/counted=%v", tc.name, counted), func(t *testing.T) {
				t.Parallel()
				s := newFlawedServer(tc.flaw)
				srv := httptest.NewServer(s)
				defer srv.Close()
				o := Options{Headers: []string{"Authorization=Bearer a"}, RequireKey: true,
					AsA: "Authorization=Bearer a", AsB: "Authorization=Bearer b", TTL: 500 * time.Millisecond, Slow: true}
				want := results(uncountedPass, tc.uncounted)
				if counted {
					o.EffectsURL = srv.URL + "/effects"
					want = results(allPass, tc.counted)
				}
				rep, err := runAudit(t, srv.URL+"/charges", o)
				if err != nil {
					t.Fatal(err)
				}
				assertCard(t, rep, want)
				if counted != (rep.EffectsSource == "effects-url") {
					t.Fatalf("effects source %q", rep.EffectsSource)
				}
			})
		}
	}
}

// TestAuditPassesIdemMiddleware: idem's own middleware over memstore, in
// front of the auditor's own fixture upstream, passes every check with
// the fixture's count, whether duplicates in flight are refused or wait;
// without a count the replay-based checks are inconclusive.
func TestAuditPassesIdemMiddleware(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		inFlight idem.InFlightPolicy
		counted  bool
	}{
		{"reject", idem.InFlightReject, true},
		{"wait", idem.InFlightWait, true},
		{"reject/uncounted", idem.InFlightReject, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := idem.New(memstore.New(), idem.Config{TTL: 5 * time.Second, InFlight: tc.inFlight, AllowVolatileStore: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User"),
				Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
			if err != nil {
				t.Fatal(err)
			}
			fx := &Fixture{}
			srv := httptest.NewServer(mw.Handler(fx))
			defer srv.Close()
			o := Options{Headers: []string{"X-User=a"}, RequireKey: true, AsA: "X-User=a", AsB: "X-User=b", TTL: 500 * time.Millisecond, Slow: true}
			want := uncountedPass
			if tc.counted {
				o.Counter, want = fx, allPass
			}
			rep, err := runAudit(t, srv.URL+"/charges", o)
			if err != nil {
				t.Fatal(err)
			}
			assertCard(t, rep, want)
			if !tc.counted {
				return
			}
			// Every counted check says what it counted: one effect per
			// intent that succeeded, none for a refusal.
			wantMade := map[string]int64{"replay": 1, "divergence": 2, "concurrency": 1, "in-flight": 1, "missing-key": 0, "key-limits": 0, "scope": 2, "retention": 1}
			for _, c := range rep.Checks {
				w, ok := wantMade[c.Name]
				if ok != (c.Effects != nil) || ok && (c.Effects.Made != w || c.Effects.Want != w) {
					t.Errorf("%s: effects %+v, want made = want = %d (counted: %v)", c.Name, c.Effects, w, ok)
				}
			}
			if n, _ := fx.Effects(context.Background()); n != 1+2+1+2+1 {
				t.Errorf("the fixture made %d effects, want 7 (one per intent that succeeded)", n)
			}
		})
	}
}

// TestSameAnswer: duplicates of one intent must get the same status and
// an equivalent body: byte for byte, or the same JSON document.
func TestSameAnswer(t *testing.T) {
	t.Parallel()
	replayed := http.Header{idemhttp.ReplayedHeader: {"true"}}
	for _, tc := range []struct {
		a, b *reply
		same bool
	}{
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 201, body: `{"id":1}`}, true},
		{&reply{status: 201, body: `{"id":1,"n":"x"}`}, &reply{status: 201, body: "{ \"n\": \"x\",\n \"id\": 1 }\n"}, true},
		{&reply{status: 201, body: "plain"}, &reply{status: 201, body: "plain"}, true},
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 200, body: `{"id":1}`}, false},
		// A replay mark does not make another body the same answer.
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 201, header: replayed, body: `{"id":2}`}, false},
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 201, body: `{"id":1,"at":"now"}`}, false},
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 201, body: `{"id":1.0}`}, false},
		{&reply{status: 201, body: `{"id":1}`}, &reply{status: 201, body: `{"id":1}{}`}, false},
		{&reply{status: 201, body: "plain"}, &reply{status: 201, body: "plain "}, false},
	} {
		if got := tc.b.sameAs(tc.a); got != tc.same {
			t.Errorf("%s same as %s: %v, want %v", tc.b, tc.a, got, tc.same)
		}
	}
}

// TestParseCount: the effect count an --effects-url answers, in each
// format it may take.
func TestParseCount(t *testing.T) {
	t.Parallel()
	prom := `# HELP charges_total Charges made.
# TYPE charges_total counter
charges_total{currency="EUR",result="ok"} 7
charges_total{currency="USD",result="ok"} 5
charges_total{currency="EUR",result="declined"} 2
charges_created 1.7e9
refunds_total 3
`
	for _, tc := range []struct {
		body, metric string
		want         int64
		err          string
	}{
		{"42\n", "", 42, ""},
		{`{"count": 9, "other": "x"}`, "", 9, ""},
		{`{"count": 1.5}`, "", 0, "not a count"},
		{`{"total": 9}`, "", 0, "not a count"},
		{prom, "", 0, "--effects-metric"},
		{prom, "charges_total", 14, ""},
		{prom, `charges_total{result="ok"}`, 12, ""},
		{prom, `charges_total{currency="EUR", result="ok"}`, 7, ""},
		{prom, "refunds_total", 3, ""},
		{prom, "payouts_total", 0, "no sample"},
		{"x_total{a=\"}\"} 2\n", `x_total{a="}"}`, 2, ""},
		{"x_total 2.5\n", "x_total", 0, "not a count"},
	} {
		got, err := parseCount([]byte(tc.body), tc.metric)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q, %q: %d, %v; want an error with %q", clipText(tc.body), tc.metric, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q, %q: %d, %v; want %d", clipText(tc.body), tc.metric, got, err, tc.want)
		}
	}
}

// TestEffectsMetric: an audit reads a Prometheus counter through
// --effects-metric, and a count that grew by more than one per intent
// fails the check whatever the answers were.
func TestEffectsMetric(t *testing.T) {
	t.Parallel()
	s := newFlawedServer(runsThenReplays)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprintf(w, "# TYPE charges_total counter\ncharges_total{status=\"ok\"} %d\ncharges_total{status=\"declined\"} 5\n", s.charges.Load())
			return
		}
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	rep, err := runAudit(t, srv.URL, Options{EffectsURL: srv.URL + "/metrics", EffectsMetric: `charges_total{status="ok"}`})
	if err != nil {
		t.Fatal(err)
	}
	assertCard(t, rep, results(allPass, "replay:fail divergence:fail concurrency:fail in-flight:fail missing-key:skip scope:skip retention:skip"))
}

// TestWriteText: the table names the failed check and why, and the verdict
// counts the requests.
func TestWriteText(t *testing.T) {
	t.Parallel()
	s := newFlawedServer(noFingerprint)
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
	s := newFlawedServer(flawless)
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
	flawless            flaw = iota
	noIdempotency            // ignores the key: every request runs the effect
	noIdempotencyAlike       // the same, answering every request alike
	checkThenAct             // looks the key up, runs the effect, then records: no claim
	runsThenReplays          // runs the effect, then answers the recorded answer if there is one
	replaysOtherBody         // a replay re-renders the answer (a field that changes)
	noFingerprint            // serves the recorded answer to another body
	globalScope              // one key space for every principal
	globalScopeUnmarked      // the same, and replays carry no Idempotent-Replayed
	lockOnly                 // refuses duplicates in flight, but keeps no answer: runs a later one again
	optionalKey              // runs a request without a key
	lenientKeys              // accepts empty and overlong keys
	noRetryAfter             // refuses a duplicate in flight without Retry-After
	plainErrors              // answers errors as text/plain
	forgetful                // keeps records for 200ms (the audit replays at 450ms)
)

// burstSize is how many requests the concurrency check sends at once in
// these tests (idem audit's default).
const burstSize = 16

// flawedServer keeps idempotency records itself, correctly except for its
// flaw: it requires a key, scopes keys by Authorization, fingerprints the
// canonical body, refuses duplicates in flight with 409 and Retry-After,
// and answers errors as problems. GET answers its effect count.
//
// It is deterministic under the concurrency check's burst (the key that
// ends in -concurrency): a request of the burst that runs the effect holds
// it until all burstSize requests of the burst have arrived (and, for
// check-then-act, have looked the key up and found it absent). So the
// claimant's duplicates are all in flight — refused, or each running the
// effect for the flaws that do — with no dependence on timing.
type flawedServer struct {
	flaw     flaw
	mu       sync.Mutex
	recs     map[string]*auditRec
	arrivals map[string]int           // requests seen per key
	gates    map[string]chan struct{} // closed when a burst key's burstSize requests arrived
	charges  atomic.Int64
	served   atomic.Int64
}

func newFlawedServer(f flaw) *flawedServer {
	return &flawedServer{flaw: f, recs: map[string]*auditRec{}, arrivals: map[string]int{}, gates: map[string]chan struct{}{}}
}

type auditRec struct {
	fp   string
	done bool
	body string
	at   time.Time
}

// arrived counts a request of key; s.mu is held.
func (s *flawedServer) arrived(key string) {
	s.arrivals[key]++
	if s.arrivals[key] == burstSize {
		close(s.gate(key))
	}
}

// gate is key's burst gate; s.mu is held.
func (s *flawedServer) gate(key string) chan struct{} {
	g, ok := s.gates[key]
	if !ok {
		g = make(chan struct{})
		s.gates[key] = g
	}
	return g
}

// hold waits, for the burst's key, until all of the burst has arrived.
func (s *flawedServer) hold(key string) {
	if !strings.HasSuffix(key, "-concurrency") {
		return
	}
	s.mu.Lock()
	g := s.gate(key)
	s.mu.Unlock()
	select {
	case <-g:
	case <-time.After(20 * time.Second): // the burst never completed: the card will say so
	}
}

// effect makes one charge and returns its answer.
func (s *flawedServer) effect() string {
	n := s.charges.Add(1)
	if s.flaw == noIdempotencyAlike {
		return `{"status":"accepted"}`
	}
	return fmt.Sprintf(`{"id":%d}`, n)
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

func (s *flawedServer) replay(w http.ResponseWriter, rec *auditRec) {
	body := rec.body
	if s.flaw == replaysOtherBody {
		body = strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"served":%d}`, s.served.Add(1))
	}
	if s.flaw != globalScopeUnmarked {
		w.Header().Set(idemhttp.ReplayedHeader, "true")
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, body)
}

func (s *flawedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, s.charges.Load())
		return
	}
	if s.flaw == noIdempotency || s.flaw == noIdempotencyAlike {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, s.effect())
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
	if s.flaw == globalScope || s.flaw == globalScopeUnmarked {
		id = string(key)
	}
	if s.flaw == runsThenReplays {
		// The effect first, then the record: every request is a charge.
		out := s.effect()
		s.mu.Lock()
		rec, ok := s.recs[id]
		if !ok {
			s.recs[id] = &auditRec{fp: fp, done: true, body: out, at: time.Now()}
		}
		s.mu.Unlock()
		switch {
		case !ok:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, out)
		case rec.fp != fp:
			s.problem(w, http.StatusUnprocessableEntity, "key-mismatch")
		default:
			s.replay(w, rec)
		}
		return
	}
	s.mu.Lock()
	s.arrived(string(key))
	rec, ok := s.recs[id]
	if ok && (s.flaw == lockOnly && rec.done || s.flaw == forgetful && rec.done && time.Since(rec.at) > 200*time.Millisecond) {
		ok = false
	}
	switch {
	case ok && rec.fp != fp:
		s.mu.Unlock()
		s.problem(w, http.StatusUnprocessableEntity, "key-mismatch")
		return
	case ok && !rec.done:
		s.mu.Unlock()
		s.problem(w, http.StatusConflict, "in-flight")
		return
	case ok && rec.done:
		s.mu.Unlock()
		s.replay(w, rec)
		return
	}
	rec = &auditRec{fp: fp}
	if s.flaw != checkThenAct {
		s.recs[id] = rec // the claim, before the effect
	}
	s.mu.Unlock()
	// Check-then-act: the key was absent when looked up; by the time the
	// burst's requests act, each of them has looked it up, found it
	// absent, and runs the effect.
	s.hold(string(key))
	out := s.effect()
	s.mu.Lock()
	rec.done, rec.body, rec.at = true, out, time.Now()
	s.recs[id] = rec
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, out)
}
