package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// operator makes an operators file entry with a cheap hash (the tests
// need no brute-force resistance).
func operator(t *testing.T, name, password string, role Role) Operator {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return Operator{Name: name, Hash: h, Role: role}
}

// operatorsFixture is a dashboard whose operators are alice (decider,
// password alice-pass-1) and victor (viewer, victor-pass-1).
func operatorsFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	cfg.Operators = []Operator{operator(t, "alice", "alice-pass-1", RoleDecider), operator(t, "victor", "victor-pass-1", RoleViewer)}
	return newFixture(t, cfg)
}

// agent is another browser on the same dashboard: its own cookies.
func (f *fixture) agent() *fixture {
	g := *f
	jar, _ := cookiejar.New(nil)
	g.c = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &g
}

// loginAs posts the login form with an operator's name and password.
func (f *fixture) loginAs(name, password string) (*http.Response, string) {
	f.t.Helper()
	_, page := f.get("/login")
	m := csrfR.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("login page without a CSRF token:\n%s", page)
	}
	return f.post("/login", url.Values{"csrf": {m[1]}, "operator": {name}, "password": {password}, "next": {"/"}})
}

var previewR = regexp.MustCompile(`name="preview" value="([0-9a-f]+)"`)

// decide posts a decision as the page does: first its preview, then the
// decision with the preview's hash. A refusal of the preview is returned
// as it is.
func (f *fixture) decide(form url.Values) (*http.Response, string) {
	f.t.Helper()
	pf := url.Values{}
	for k, v := range form {
		pf[k] = v
	}
	pf.Set("step", "preview")
	resp, page := f.post("/record/resolve", pf)
	if resp.StatusCode != http.StatusOK {
		return resp, page
	}
	if form.Get("as") != "released" {
		m := previewR.FindStringSubmatch(page)
		if m == nil {
			f.t.Fatalf("preview page without the preview's hash:\n%s", page)
		}
		form.Set("preview", m[1])
	}
	form.Set("step", "decide")
	return f.post("/record/resolve", form)
}

// recordForm is the decision form of key's record page, as loaded now.
func (f *fixture) recordForm(key string) url.Values {
	f.t.Helper()
	_, page := f.get("/record?key=" + url.QueryEscape(key))
	csrf, ver := fields(f.t, page)
	rec, err := f.st.Get(context.Background(), "", key)
	if err != nil {
		f.t.Fatal(err)
	}
	return url.Values{"csrf": {csrf}, "key": {key}, "fence": {strconv.FormatInt(rec.Fence, 10)}, "version": {ver}}
}

func TestParseOperators(t *testing.T) {
	t.Parallel()
	h, _ := bcrypt.GenerateFromPassword([]byte("a-password"), bcrypt.MinCost)
	good := "# operators\n\nalice:" + string(h) + "\nvictor:" + string(h) + ":viewer\n  bob:" + string(h) + ":decider  \n"
	ops, err := ParseOperators(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0].Name != "alice" || ops[0].Role != RoleDecider || ops[1].Role != RoleViewer || ops[2].Name != "bob" || ops[2].Role != RoleDecider {
		t.Fatalf("parsed %+v", ops)
	}
	for name, bad := range map[string]string{
		"no hash":     "alice\n",
		"not bcrypt":  "alice:plaintext\n",
		"bad role":    "alice:" + string(h) + ":admin\n",
		"named twice": "alice:" + string(h) + "\nalice:" + string(h) + "\n",
		"empty":       "# nobody\n",
		"empty name":  ":" + string(h) + "\n",
		"four fields": "alice:" + string(h) + ":viewer:x\n",
	} {
		if _, err := ParseOperators(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		} else if strings.Contains(err.Error(), string(h)) {
			t.Errorf("%s: the error shows the hash: %v", name, err)
		}
	}
	if line := OperatorLine(Operator{Name: "alice", Hash: h, Role: RoleViewer}); line != "alice:"+string(h)+":viewer" {
		t.Fatalf("OperatorLine: %q", line)
	}
	for _, pw := range []string{"short", strings.Repeat("x", 73)} {
		if _, err := HashPassword([]byte(pw)); !errors.Is(err, ErrPassword) {
			t.Errorf("HashPassword(%d bytes): %v, want ErrPassword", len(pw), err)
		}
	}
}

func TestNewRefusesMixedLogins(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	decide := func(context.Context, Decision) (*idem.Record, error) { return nil, nil }
	alice := operator(t, "alice", "alice-pass-1", RoleDecider)
	for name, cfg := range map[string]Config{
		"operators and token":    {Operators: []Operator{alice}, Token: []byte(testToken)},
		"operators and operator": {Operators: []Operator{alice}, Operator: "bob"},
		"neither":                {},
		"no role":                {Operators: []Operator{{Name: "x", Hash: alice.Hash}}},
	} {
		cfg.Store, cfg.Decide = st, decide
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestLoginPerOperator: two operators log in with their own passwords;
// each page names the one logged in, and their sessions are theirs.
func TestLoginPerOperator(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	v := f.agent()
	for _, c := range []struct {
		f        *fixture
		name, pw string
	}{{f, "alice", "alice-pass-1"}, {v, "victor", "victor-pass-1"}} {
		resp, body := c.f.loginAs(c.name, c.pw)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login %s: %d\n%s", c.name, resp.StatusCode, body)
		}
	}
	_, page := f.get("/")
	_, vpage := v.get("/")
	if !strings.Contains(page, "signed in as <strong>alice</strong>") || !strings.Contains(vpage, "signed in as <strong>victor</strong>") {
		t.Fatalf("pages do not name the operator logged in:\n%s\n%s", page, vpage)
	}
	if strings.Contains(page, "token-banner") || strings.Contains(page, "Shared token mode") {
		t.Fatal("an operators-file dashboard warns about the shared token")
	}
	// The form takes no token field: a token is not a password here.
	_, login := f.agent().get("/login")
	if !strings.Contains(login, `name="password"`) || strings.Contains(login, `name="token"`) {
		t.Fatalf("login form fields:\n%s", login)
	}
}

// TestWrongLoginRefused: a wrong password and an unknown name get the
// same answer and no session; the unknown name is checked against a
// dummy hash of the file's cost, so it costs what a wrong password costs.
func TestWrongLoginRefused(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	var problems []string
	for _, c := range [][2]string{{"alice", "victor-pass-1"}, {"alice", ""}, {"mallory", "alice-pass-1"}, {"Alice", "alice-pass-1"}} {
		g := f.agent()
		resp, body := g.loginAs(c[0], c[1])
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("login %s/%q: %d, want 401", c[0], c[1], resp.StatusCode)
		}
		for _, ck := range resp.Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				t.Fatalf("login %s/%q set a session", c[0], c[1])
			}
		}
		if resp, _ := g.get("/"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("after a refused login / answered %d, want the login redirect", resp.StatusCode)
		}
		m := regexp.MustCompile(`id="problem">([^<]*)<`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("refused login without a problem:\n%s", body)
		}
		problems = append(problems, m[1])
	}
	for _, p := range problems {
		if p != html.EscapeString(wrongLogin) {
			t.Fatalf("refusals differ: %q", problems)
		}
	}
	if c, err := bcrypt.Cost(f.s.dummyHash); err != nil || c != bcrypt.MinCost {
		t.Fatalf("dummy hash cost %d %v, want the operators' %d", c, err, bcrypt.MinCost)
	}
	if _, ok := f.s.checkPassword("mallory", ""); ok {
		t.Fatal("an unknown name with an empty password passes")
	}
}

// TestViewerCannotDecide: a viewer sees the record without a form, and a
// decision posted anyway is refused with 403 and changes nothing.
func TestViewerCannotDecide(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{AuditLog: filepath.Join(t.TempDir(), "audit.jsonl")})
	if resp, _ := f.loginAs("victor", "victor-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	rec := f.unknown("", "k1", "charge", 0)
	_, page := f.get("/record?key=k1")
	if strings.Contains(page, `id="resolve-form"`) || !strings.Contains(page, `id="viewer-note"`) {
		t.Fatalf("a viewer's record page offers the form:\n%s", page)
	}
	csrf := csrfR.FindStringSubmatch(page)[1] // the logout form's: the session's token
	ver := versionOf(t, f, rec)
	for _, as := range []string{"released", "failed", "succeeded"} {
		form := url.Values{"csrf": {csrf}, "key": {"k1"}, "fence": {fmt.Sprint(rec.Fence)}, "version": {ver}, "as": {as},
			"reason": {"I am only a viewer"}, "status": {"201"}, "body": {`{"id":"ch_1"}`}}
		if as == "released" {
			form.Del("status")
			form.Del("body")
		}
		for _, step := range []string{"preview", "decide"} {
			form.Set("step", step)
			resp, body := f.post("/record/resolve", form)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "only a decider") {
				t.Fatalf("viewer posts %s (%s): %d\n%s", as, step, resp.StatusCode, body)
			}
		}
	}
	cur, err := f.st.Get(context.Background(), "", "k1")
	if err != nil || cur.State != idem.StateUnknown || cur.Fence != rec.Fence {
		t.Fatalf("a viewer's decision changed the record: %+v %v", cur, err)
	}
	if b, _ := os.ReadFile(f.audit); len(b) != 0 {
		t.Fatalf("a refused decision was logged: %s", b)
	}
}

func versionOf(t *testing.T, f *fixture, rec *idem.Record) string {
	t.Helper()
	cur, err := f.st.Get(context.Background(), rec.Scope, rec.Key)
	if err != nil {
		t.Fatal(err)
	}
	return version(cur, f.s.cfg.Now())
}

// TestDecisionsThatCannotLie: what the form refuses, before anything is
// written: an empty body on succeeded, a body that does not parse where
// JSON is due, a succeeded without a status, a decision without a reason.
func TestDecisionsThatCannotLie(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	if resp, _ := f.loginAs("alice", "alice-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	f.unknown("", "k1", "charge", 0)
	for _, c := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"empty succeeded", map[string]string{"as": "succeeded", "status": "201", "reason": "provider shows it"}, msgEmptyOK},
		{"blank succeeded", map[string]string{"as": "succeeded", "status": "200", "body": "  \n", "reason": "provider shows it"}, msgEmptyOK},
		{"succeeded without status", map[string]string{"as": "succeeded", "body": `{"id":"ch_1"}`, "reason": "provider shows it"}, msgNoStatus},
		{"succeeded as an error", map[string]string{"as": "succeeded", "status": "402", "body": `{"id":"ch_1"}`, "reason": "provider shows it"}, "decide failed"},
		{"invalid JSON", map[string]string{"as": "succeeded", "status": "201", "body": `{"id": "ch_1",}`, "reason": "provider shows it"}, msgInvalidJSON},
		{"JSON type, text body", map[string]string{"as": "succeeded", "status": "201", "content_type": "application/json", "body": `paid`, "reason": "provider shows it"}, msgInvalidJSON},
		{"invalid JSON on failed", map[string]string{"as": "failed", "status": "402", "body": `{"error":`, "reason": "declined"}, msgInvalidJSON},
		{"bad media type", map[string]string{"as": "succeeded", "status": "201", "content_type": "json", "body": `{"id":"ch_1"}`, "reason": "provider shows it"}, "not a media type"},
		{"body on 204", map[string]string{"as": "succeeded", "status": "204", "body": `{"id":"ch_1"}`, "reason": "provider shows it"}, "carries no body"},
		{"no reason (succeeded)", map[string]string{"as": "succeeded", "status": "201", "body": `{"id":"ch_1"}`, "reason": " "}, "reason is required"},
		{"no reason (failed)", map[string]string{"as": "failed", "reason": ""}, "reason is required"},
		{"no reason (released)", map[string]string{"as": "released"}, "reason is required"},
	} {
		form := f.recordForm("k1")
		for k, v := range c.set {
			form.Set(k, v)
		}
		for _, step := range []string{"preview", "decide"} {
			form.Set("step", step)
			resp, body := f.post("/record/resolve", form)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), c.want) {
				t.Fatalf("%s (%s): %d, want 400 saying %q\n%s", c.name, step, resp.StatusCode, c.want, body)
			}
		}
		if cur, err := f.st.Get(context.Background(), "", "k1"); err != nil || cur.State != idem.StateUnknown {
			t.Fatalf("%s: a refused decision changed the record: %+v %v", c.name, cur, err)
		}
	}
	// Accepted: a 204 without a body, and a failure without one.
	for _, set := range []map[string]string{
		{"as": "succeeded", "status": "204", "reason": "provider shows it deleted"},
		{"as": "failed", "reason": "declined"},
	} {
		form := f.recordForm("k1")
		for k, v := range set {
			form.Set(k, v)
		}
		form.Set("step", "preview")
		if resp, body := f.post("/record/resolve", form); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="preview"`) {
			t.Fatalf("preview %v: %d\n%s", set, resp.StatusCode, body)
		}
	}
}

// TestValidateDecisionByOrigin: the rules follow what made the record.
func TestValidateDecisionByOrigin(t *testing.T) {
	t.Parallel()
	rec := func(in idem.Intent) *idem.Record {
		b, _ := json.Marshal(in)
		return &idem.Record{Key: "k", Intent: b}
	}
	jsonReq := rec(idem.Intent{Origin: idemhttp.Origin, Fields: map[string]string{"content_type": "application/json"}})
	engine := rec(idem.Intent{Operation: "charge"})
	d := func(as, ct, body string, status int) Decision {
		return Decision{As: as, ContentType: ct, Body: []byte(body), HasBody: body != "", Status: status, Reason: "r", Operator: "alice"}
	}
	for _, c := range []struct {
		name string
		rec  *idem.Record
		d    Decision
		ok   bool
	}{
		{"JSON request, text body", jsonReq, d("succeeded", "text/plain", "paid", 200), false},
		{"JSON request, text body detected", jsonReq, d("succeeded", "", "paid", 200), false},
		{"JSON request, JSON body", jsonReq, d("succeeded", "", `{"paid":true}`, 200), true},
		{"JSON request, problem+json failure", jsonReq, d("failed", "application/problem+json", `{"title":"declined"}`, 402), true},
		{"text body, no JSON anywhere", rec(idem.Intent{Origin: idemhttp.Origin}), d("succeeded", "", "OK", 200), true},
		{"engine, empty succeeded", engine, d("succeeded", "", "", 0), false},
		{"engine, value not JSON", engine, d("succeeded", "", "{paid", 0), false},
		{"engine, status given", engine, d("succeeded", "", `{"paid":true}`, 201), false},
		{"engine, JSON value", engine, d("succeeded", "", `{"paid":true}`, 0), true},
		{"engine, failure without body", engine, d("failed", "", "", 0), true},
		{"release with a body", engine, d("released", "", `{"x":1}`, 0), false},
		{"no operator", engine, Decision{As: "released", Reason: "r"}, false},
		{"unknown decision", engine, Decision{As: "paid", Reason: "r", Operator: "alice"}, false},
	} {
		err := validateDecision(c.rec, c.d)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrDecision) {
			t.Errorf("%s: %v is not ErrDecision", c.name, err)
		}
	}
}

// TestPreviewIsTheReplay: a record made unknown by a real idemhttp
// middleware (its handler dies mid-effect) is decided through the page;
// the preview the page showed before the decision is exactly what the
// client's retry through the middleware then receives: status, every
// header, body.
func TestPreviewIsTheReplay(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	if resp, _ := f.loginAs("alice", "alice-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := idem.New(f.st, idem.Config{Logger: quiet, AllowVolatileStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		ran++
		panic(http.ErrAbortHandler) // the attempt dies mid-effect
	}))
	call := func(key string) *httptest.ResponseRecorder {
		rw := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":4999}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"`+key+`"`)
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(rw, req)
		}()
		return rw
	}
	for _, c := range []struct {
		key  string
		set  map[string]string
		want int
	}{
		{"o-1", map[string]string{"as": "succeeded", "status": "201", "body": `{"id":"ch_3PqL9x","paid":true}`}, 201},
		{"o-2", map[string]string{"as": "succeeded", "status": "200", "content_type": "text/plain; charset=utf-8", "body": "captured"}, 200},
		{"o-3", map[string]string{"as": "failed", "status": "402", "content_type": "application/problem+json", "body": `{"title":"card declined"}`}, 402},
		{"o-4", map[string]string{"as": "failed"}, 500},
		{"o-5", map[string]string{"as": "succeeded", "status": "204"}, 204},
	} {
		call(c.key)
		cur, err := f.st.Get(context.Background(), "", c.key)
		if err != nil {
			t.Fatal(err)
		}
		if cur.EffectiveState(f.s.cfg.Now()) != idem.StateUnknown {
			// The middleware left it in progress: mark it as a reader would.
			if _, err := f.st.Finish(context.Background(), idem.FinishParams{Key: c.key, Fence: cur.Fence, AttemptID: cur.AttemptID,
				State: idem.StateUnknown, CompletedAt: f.s.cfg.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		form := f.recordForm(c.key)
		for k, v := range c.set {
			form.Set(k, v)
		}
		form.Set("reason", "provider dashboard")
		form.Set("step", "preview")
		resp, page := f.post("/record/resolve", form)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: preview %d\n%s", c.key, resp.StatusCode, page)
		}
		status, hdr, body := parsePreview(t, page)
		form.Set("preview", previewR.FindStringSubmatch(page)[1])
		form.Set("step", "decide")
		if resp, page := f.post("/record/resolve", form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: decide %d\n%s", c.key, resp.StatusCode, page)
		}
		before := ran
		got := call(c.key)
		if ran != before {
			t.Fatalf("%s: the retry ran the handler again", c.key)
		}
		var gotHdr []string
		for k, vs := range got.Result().Header {
			gotHdr = append(gotHdr, k+": "+strings.Join(vs, ", "))
		}
		if got.Code != c.want || status != got.Code || body != got.Body.String() || !sameSet(hdr, gotHdr) {
			t.Fatalf("%s: preview %d %q %q; the retry got %d %q %q", c.key, status, hdr, body, got.Code, gotHdr, got.Body.String())
		}
	}
}

var (
	previewStatusR = regexp.MustCompile(`id="preview-status">HTTP (\d+)<`)
	previewRowR    = regexp.MustCompile(`<tr><th>([^<]*)</th><td>([^<]*)</td></tr>`)
	previewBodyR   = regexp.MustCompile(`(?s)id="preview-body">(.*?)</pre>`)
	previewTableR  = regexp.MustCompile(`(?s)id="preview-headers">(.*?)</table>`)
)

// parsePreview reads the preview block of a record page.
func parsePreview(t *testing.T, page string) (int, []string, string) {
	t.Helper()
	m := previewStatusR.FindStringSubmatch(page)
	tbl := previewTableR.FindStringSubmatch(page)
	if m == nil || tbl == nil {
		t.Fatalf("no preview on the page:\n%s", page)
	}
	status, _ := strconv.Atoi(m[1])
	var hdr []string
	for _, r := range previewRowR.FindAllStringSubmatch(tbl[1], -1) {
		hdr = append(hdr, html.UnescapeString(r[1])+": "+html.UnescapeString(r[2]))
	}
	body := ""
	if b := previewBodyR.FindStringSubmatch(page); b != nil {
		body = html.UnescapeString(b[1])
	}
	return status, hdr, body
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestDecisionNeedsItsPreview: a succeeded decision posted without the
// preview's hash records nothing and shows the preview; one whose body
// changed after its preview records nothing either.
func TestDecisionNeedsItsPreview(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	if resp, _ := f.loginAs("alice", "alice-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	f.unknown("", "k1", "charge", 0)
	form := f.recordForm("k1")
	form.Set("as", "succeeded")
	form.Set("status", "201")
	form.Set("body", `{"id":"ch_1"}`)
	form.Set("reason", "provider shows ch_1")
	form.Set("step", "decide")
	resp, page := f.post("/record/resolve", form)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="preview"`) || !strings.Contains(page, "then record the decision") {
		t.Fatalf("decision without a preview: %d\n%s", resp.StatusCode, page)
	}
	form.Set("preview", previewR.FindStringSubmatch(page)[1])
	form.Set("body", `{"id":"ch_2"}`)
	if resp, page := f.post("/record/resolve", form); resp.StatusCode != http.StatusConflict || !strings.Contains(page, "changed since its preview") {
		t.Fatalf("decision changed after its preview: %d\n%s", resp.StatusCode, page)
	}
	if cur, _ := f.st.Get(context.Background(), "", "k1"); cur.State != idem.StateUnknown {
		t.Fatalf("recorded without its preview: %s", cur.State)
	}
}

// TestAuditLogNamesTheVerifiedOperator: each decision's line names the
// operator who logged in with their password, their role, and the hash of
// what was recorded, chained to the line before.
func TestAuditLogNamesTheVerifiedOperator(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{AuditLog: filepath.Join(t.TempDir(), "audit.jsonl")})
	if resp, _ := f.loginAs("alice", "alice-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	f.unknown("", "k1", "charge", 0)
	f.unknown("", "k2", "charge", 0)
	form := f.recordForm("k1")
	form.Set("as", "succeeded")
	form.Set("status", "201")
	form.Set("body", `{"id":"ch_1"}`)
	form.Set("reason", "provider shows ch_1")
	if resp, page := f.decide(form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d\n%s", resp.StatusCode, page)
	}
	form = f.recordForm("k2")
	form.Set("as", "released")
	form.Set("reason", "no trace at the provider")
	if resp, page := f.decide(form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("release: %d\n%s", resp.StatusCode, page)
	}
	b, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("audit log has %d lines:\n%s", len(lines), b)
	}
	var e1, e2 AuditEntry
	if json.Unmarshal(lines[0], &e1) != nil || json.Unmarshal(lines[1], &e2) != nil {
		t.Fatalf("audit log:\n%s", b)
	}
	rec, _ := f.st.Get(context.Background(), "", "k1")
	if e1.Operator != "alice" || e1.Role != "decider" || e1.Decision != "succeeded" || e1.Seq != 1 || e1.Prev != "" ||
		e1.Result != resultHash(rec.Result) || e1.Reason != "provider shows ch_1" || e1.Key != "k1" {
		t.Fatalf("first entry %+v", e1)
	}
	if e2.Operator != "alice" || e2.Decision != "released" || e2.Seq != 2 || e2.Prev != lineHash(lines[0]) {
		t.Fatalf("second entry %+v", e2)
	}
	rep, err := VerifyAuditLog(bytes.NewReader(b), "")
	if err != nil || !rep.Intact || rep.Lines != 2 || rep.Head != lineHash(lines[1]) {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestTokenModeNamesAreNotTrusted: with the shared token, the typed name
// is logged as token:NAME and every page warns.
func TestTokenModeNamesAreNotTrusted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{AuditLog: filepath.Join(t.TempDir(), "audit.jsonl")})
	f.login("alice")
	_, page := f.get("/")
	if !strings.Contains(page, `id="token-banner"`) || !strings.Contains(page, "signed in as <strong>token:alice</strong>") {
		t.Fatalf("token-mode page:\n%s", page)
	}
	f.unknown("", "k1", "charge", 0)
	form := f.recordForm("k1")
	form.Set("as", "released")
	form.Set("reason", "no trace")
	if resp, _ := f.decide(form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", resp.StatusCode)
	}
	b, _ := os.ReadFile(f.audit)
	if !strings.Contains(string(b), `"operator":"token:alice"`) || strings.Contains(string(b), `"operator":"alice"`) {
		t.Fatalf("audit log:\n%s", b)
	}
	// --operator is a name too, not an identity.
	g := newFixture(t, Config{Operator: "ops-team"})
	g.login("")
	if _, page := g.get("/"); !strings.Contains(page, "signed in as <strong>token:ops-team</strong>") {
		t.Fatalf("--operator page:\n%s", page)
	}
}

// writeChain writes n entries through the dashboard's appender.
func writeChain(t *testing.T, n int) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := &auditLog{path: path}
	for i := range n {
		if err := a.append(AuditEntry{Operator: "alice", Role: "decider", Key: fmt.Sprintf("k%d", i+1), Decision: "released", Reason: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// TestAuditChainDetectsEdits: editing, removing, inserting or reordering
// a line, or cutting the log, breaks the chain at the first line that no
// longer follows; cutting whole lines from the end is caught with an
// anchor.
func TestAuditChainDetectsEdits(t *testing.T) {
	t.Parallel()
	_, b := writeChain(t, 5)
	rep, err := VerifyAuditLog(bytes.NewReader(b), "")
	if err != nil || !rep.Intact || rep.Lines != 5 {
		t.Fatalf("intact log: %+v %v", rep, err)
	}
	head := rep.Head
	lines := strings.SplitAfter(string(b), "\n")[:5]
	join := func(ls ...string) string { return strings.Join(ls, "") }
	for _, c := range []struct {
		name   string
		log    string
		anchor string
		line   int64
	}{
		{"middle line edited", join(lines[0], lines[1], strings.Replace(lines[2], `"reason":"r"`, `"reason":"R"`, 1), lines[3], lines[4]), "", 4},
		{"operator renamed", join(lines[0], strings.Replace(lines[1], `"alice"`, `"mallory"`, 1), lines[2], lines[3], lines[4]), "", 3},
		{"middle line removed", join(lines[0], lines[1], lines[3], lines[4]), "", 3},
		{"first line removed", join(lines[1], lines[2], lines[3], lines[4]), "", 1},
		{"lines swapped", join(lines[0], lines[2], lines[1], lines[3], lines[4]), "", 2},
		{"line duplicated", join(lines[0], lines[1], lines[1], lines[2], lines[3], lines[4]), "", 3},
		{"cut mid-line", join(lines[0], lines[1], lines[2], lines[3], lines[4][:len(lines[4])/2]), "", 5},
		{"last newline cut", join(lines[0], lines[1], lines[2], lines[3], strings.TrimSuffix(lines[4], "\n")), "", 5},
		{"blank line", join(lines[0], "\n", lines[1], lines[2], lines[3], lines[4]), "", 2},
		{"last lines cut, anchored", join(lines[0], lines[1], lines[2]), head, 4},
		{"truncated to nothing, anchored", "", head, 1},
	} {
		rep, err := VerifyAuditLog(strings.NewReader(c.log), c.anchor)
		if err != nil || rep.Intact || rep.BrokenLine != c.line || rep.Problem == "" {
			t.Errorf("%s: %+v %v, want broken at line %d", c.name, rep, err, c.line)
		}
	}
	// An anchor from earlier still holds once the log has grown.
	rep3, _ := VerifyAuditLog(strings.NewReader(join(lines[0], lines[1], lines[2])), "")
	if rep, _ := VerifyAuditLog(bytes.NewReader(b), rep3.Head); !rep.Intact {
		t.Fatalf("a grown log fails its earlier anchor: %+v", rep)
	}
}

// TestBrokenAuditLogStopsDecisions: the dashboard does not start on a
// log whose chain is broken, and refuses decisions while the log ends in
// a partial line.
func TestBrokenAuditLogStopsDecisions(t *testing.T) {
	t.Parallel()
	path, b := writeChain(t, 3)
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(lines[0]+lines[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	_, err := New(Config{Store: st, Token: []byte(testToken), AuditLog: path, RunningEvery: -1,
		Decide: func(context.Context, Decision) (*idem.Record, error) { return nil, nil }})
	if !errors.Is(err, ErrAuditLog) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("New on a broken log: %v", err)
	}

	f := newFixture(t, Config{AuditLog: filepath.Join(t.TempDir(), "audit.jsonl")})
	f.login("alice")
	f.unknown("", "k1", "charge", 0)
	if err := os.WriteFile(f.audit, []byte(`{"seq":1,"operator":"x"`), 0o600); err != nil {
		t.Fatal(err)
	}
	form := f.recordForm("k1")
	form.Set("as", "released")
	form.Set("reason", "no trace")
	if resp, body := f.decide(form); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "partial line") {
		t.Fatalf("decision on a cut log: %d\n%s", resp.StatusCode, body)
	}
	if _, err := f.st.Get(context.Background(), "", "k1"); err != nil {
		t.Fatalf("a decision that could not be logged was applied: %v", err)
	}
}

// BenchmarkPreviewDecision: the cost of a preview (a scratch memory store,
// engine and middleware, two requests) on a record made over HTTP.
func BenchmarkPreviewDecision(b *testing.B) {
	in, _ := json.Marshal(idem.Intent{Origin: idemhttp.Origin, Fields: map[string]string{"content_type": "application/json"}})
	rec := &idem.Record{Key: "k", Intent: in}
	d := Decision{As: "succeeded", Status: 201, Body: []byte(`{"id":"ch_3PqL9x","paid":true}`), HasBody: true, Reason: "r", Operator: "alice"}
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := previewDecision(ctx, rec, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPasswordCheck: one login's password check at PasswordCost,
// for a known name and for an unknown one (the dummy hash).
func BenchmarkPasswordCheck(b *testing.B) {
	h, err := HashPassword([]byte("alice-pass-1"))
	if err != nil {
		b.Fatal(err)
	}
	st := memstore.New()
	defer st.Close()
	s, err := New(Config{Store: st, Operators: []Operator{{Name: "alice", Hash: h, Role: RoleDecider}}, RunningEvery: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Decide: func(context.Context, Decision) (*idem.Record, error) { return nil, nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"alice", "mallory"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s.checkPassword(name, "wrong-password")
			}
		})
	}
}

// TestViewerCannotDecideInBulk: a viewer's list offers no bulk decision,
// and a bulk preview or confirmation a viewer posts (a decider's form
// with the viewer's session) is refused and changes nothing.
func TestViewerCannotDecideInBulk(t *testing.T) {
	t.Parallel()
	f := operatorsFixture(t, Config{})
	v := f.agent()
	if resp, _ := f.loginAs("alice", "alice-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	if resp, _ := v.loginAs("victor", "victor-pass-1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	f.unknown("", "b-1", "charge", 0)
	f.unknown("", "b-2", "charge", time.Second)
	for _, page := range []string{"/unknown", "/records?state=unknown"} {
		_, mine := f.get(page)
		_, theirs := v.get(page)
		if !strings.Contains(mine, `id="bulk-controls"`) || strings.Contains(theirs, `id="bulk-controls"`) {
			t.Fatalf("%s: bulk controls for the decider %v, for the viewer %v", page, strings.Contains(mine, `id="bulk-controls"`), strings.Contains(theirs, `id="bulk-controls"`))
		}
	}
	csrf, sel := selections(t, f, "/unknown")
	form := url.Values{"csrf": {csrf}, "sel": {sel["b-1"], sel["b-2"]}, "as": {"released"}, "reason": {"nothing charged"}}
	resp, preview := f.post("/bulk/preview", form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("decider's preview: %d", resp.StatusCode)
	}
	vcsrf, _ := selections(t, v, "/unknown")
	form.Set("csrf", vcsrf)
	confirm := confirmForm(t, preview)
	confirm.Set("csrf", vcsrf)
	for path, fm := range map[string]url.Values{"/bulk/preview": form, "/bulk/apply": confirm} {
		if resp, body := v.post(path, fm); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "only a decider") {
			t.Fatalf("viewer posts %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
	for _, k := range []string{"b-1", "b-2"} {
		if r, err := f.st.Get(context.Background(), "", k); err != nil || r.State != idem.StateUnknown {
			t.Fatalf("%s after a viewer's bulk decision: %v %v", k, r, err)
		}
	}
}
