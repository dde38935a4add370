package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

func TestMain(m *testing.M) {
	failedLoginDelay = 0 // the wrong-token test need not wait
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}

const testToken = "0123456789abcdef0123456789abcdef"

// fixture is a dashboard over a memory store, with a browser-like client
// (cookie jar, no redirects followed unless asked).
type fixture struct {
	t     *testing.T
	st    *memstore.Store
	s     *Server
	srv   *httptest.Server
	c     *http.Client
	audit string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	eng, err := idem.New(st, idem.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	cfg.Store = st
	if cfg.Operators == nil {
		cfg.Token = []byte(testToken)
	}
	if cfg.RunningEvery == 0 {
		// The tests make records after New: pages list in_progress
		// records live. TestRunningSnapshot tests the snapshot.
		cfg.RunningEvery = -1
	}
	if cfg.Decide == nil {
		cfg.Decide = func(ctx context.Context, d Decision) (*idem.Record, error) {
			// As idem ui's Decide does (resolvedResult in
			// cmd/idem/resolution.go): the result encoded for the
			// record's origin, written here on its own so that a
			// preview that encodes otherwise differs from the replay.
			res := idem.Resolution{Actor: d.Operator, Reason: d.Reason, IfFence: d.IfFence}
			if d.As == "released" {
				res.Release = true
			} else {
				res.As = idem.State(d.As)
				cur, err := st.Get(ctx, d.Scope, d.Key)
				if err != nil {
					return nil, err
				}
				dec := idem.Decision{As: idem.State(d.As), Status: d.Status, ContentType: d.ContentType, Message: d.Reason}
				if d.HasBody {
					dec.Body = d.Body
				}
				if res.Result, err = idem.EncodeDecision(cur, dec); err != nil {
					return nil, err
				}
			}
			return eng.Resolve(ctx, d.Scope, idem.Key(d.Key), res)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &fixture{t: t, st: st, s: s, srv: srv, c: c, audit: cfg.AuditLog}
}

var (
	t0    = time.Now().UTC().Truncate(time.Microsecond).Add(-2 * time.Hour)
	csrfR = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	verR  = regexp.MustCompile(`name="version" value="([0-9a-f]+)"`)
)

// unknown makes an unknown record created at t0+at.
func (f *fixture) unknown(scope, key, op string, at time.Duration) *idem.Record {
	f.t.Helper()
	ctx := context.Background()
	in, _ := json.Marshal(idem.Intent{Operation: op, Amount: 1250, Currency: "EUR", Origin: "http",
		Fields: map[string]string{"method": "POST", "path": "/v1/charges"}})
	now := t0.Add(at)
	cr, err := f.st.Claim(ctx, idem.ClaimParams{Scope: scope, Key: key, AttemptID: "a-" + key + fmt.Sprint(at), Intent: in,
		Now: now, LeaseUntil: now.Add(time.Second)})
	if err != nil || !cr.Claimed {
		f.t.Fatalf("claim %s: %v %v", key, err, cr.Claimed)
	}
	rec, err := f.st.Finish(ctx, idem.FinishParams{Scope: scope, Key: key, Fence: cr.Record.Fence, AttemptID: cr.Record.AttemptID,
		State: idem.StateUnknown, CompletedAt: now.Add(time.Second)})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

func (f *fixture) get(path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.c.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (f *fixture) post(path string, form url.Values) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.c.PostForm(f.srv.URL+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (f *fixture) login(name string) {
	f.t.Helper()
	_, page := f.get("/login")
	m := csrfR.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("login page without a CSRF token:\n%s", page)
	}
	resp, body := f.post("/login", url.Values{"csrf": {m[1]}, "token": {testToken}, "operator": {name}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("login: %d\n%s", resp.StatusCode, body)
	}
}

// csrf and version read the hidden fields of a record page.
func fields(t *testing.T, page string) (csrf, ver string) {
	t.Helper()
	c, v := csrfR.FindStringSubmatch(page), verR.FindStringSubmatch(page)
	if c == nil || v == nil {
		t.Fatalf("record page without csrf/version fields:\n%s", page)
	}
	return c[1], v[1]
}

func TestPagesNeedALogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	for _, p := range []string{"/", "/unknown", "/record?key=k"} {
		resp, _ := f.get(p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Fatalf("GET %s without a session: %d → %q, want a redirect to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := f.post("/record/resolve", url.Values{"key": {"k"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without a session: %d, want 403", resp.StatusCode)
	}
	// A wrong token makes no session.
	_, page := f.get("/login")
	csrf := csrfR.FindStringSubmatch(page)[1]
	if resp, _ := f.post("/login", url.Values{"csrf": {csrf}, "token": {testToken + "x"}, "operator": {"eve"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := f.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a failed login, / answers %d", resp.StatusCode)
	}
	// A login posted without the login form's CSRF cookie is refused.
	bare := &http.Client{CheckRedirect: f.c.CheckRedirect}
	resp, err := bare.PostForm(f.srv.URL+"/login", url.Values{"csrf": {csrf}, "token": {testToken}, "operator": {"eve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without the form's cookie: %d, want 403", resp.StatusCode)
	}
	f.login("alice")
	resp, body := f.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("after login: %d\n%s", resp.StatusCode, body)
	}
}

func TestCookieAndHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	_, page := f.get("/login")
	resp, _ := f.post("/login", url.Values{"csrf": {csrfR.FindStringSubmatch(page)[1]}, "token": {testToken}, "operator": {"a"}})
	var sc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v, want HttpOnly and SameSite=Strict", sc)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP allows inline code: %q", csp)
	}
	// No page carries inline script or style.
	f.unknown("", "k1", "charge", 0)
	for _, p := range []string{"/", "/unknown", "/record?key=k1", "/login"} {
		_, body := f.get(p)
		if regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle="|<style`).MatchString(body) {
			t.Errorf("%s has inline script or style", p)
		}
	}
	// Another Host name (DNS rebinding) is refused.
	req, _ := http.NewRequest("GET", f.srv.URL+"/login", nil)
	req.Host = "evil.example:8788"
	resp, err := f.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("Host evil.example: %d, want 421", resp.StatusCode)
	}
}

func TestResolveNeedsCSRFAndReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.login("alice")
	rec := f.unknown("", "k1", "charge", 0)
	_, page := f.get("/record?key=k1")
	csrf, ver := fields(t, page)
	form := url.Values{"key": {"k1"}, "fence": {fmt.Sprint(rec.Fence)}, "version": {ver}, "as": {"released"}, "reason": {"no trace"}}
	for name, bad := range map[string]string{"without": "", "with a wrong": strings.Repeat("0", len(csrf))} {
		form.Set("csrf", bad)
		if resp, _ := f.post("/record/resolve", form); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("post %s CSRF token: %d, want 403", name, resp.StatusCode)
		}
	}
	form.Set("csrf", csrf)
	form.Set("reason", "  ")
	if resp, body := f.post("/record/resolve", form); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "reason is required") {
		t.Fatalf("post without a reason: %d", resp.StatusCode)
	}
	if _, err := f.st.Get(context.Background(), "", "k1"); err != nil {
		t.Fatalf("a refused post changed the record: %v", err)
	}
	form.Set("reason", "no trace at the provider")
	resp, _ := f.post("/record/resolve", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("valid post: %d", resp.StatusCode)
	}
	if _, err := f.st.Get(context.Background(), "", "k1"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("released record still there: %v", err)
	}
}

// TestResolveRefusesStaleVersion: the record was released and claimed
// anew after the page was loaded. Its fence is 1 again, so only the
// version shows the page is stale; the decision must be refused.
func TestResolveRefusesStaleVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.login("alice")
	rec := f.unknown("", "k1", "charge", 0)
	_, page := f.get("/record?key=k1")
	csrf, ver := fields(t, page)
	ctx := context.Background()
	if _, err := f.st.Resolve(ctx, idem.ResolveParams{Key: "k1", Release: true, AttemptID: "other"}); err != nil {
		t.Fatal(err)
	}
	again := f.unknown("", "k1", "charge", time.Minute)
	if again.Fence != rec.Fence {
		t.Fatalf("test premise: the new record's fence is %d, want %d as before", again.Fence, rec.Fence)
	}
	form := url.Values{"csrf": {csrf}, "key": {"k1"}, "fence": {fmt.Sprint(rec.Fence)}, "version": {ver},
		"as": {"succeeded"}, "reason": {"provider says paid"}, "body": {`{"paid":true}`}}
	resp, body := f.post("/record/resolve", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "changed since you loaded") {
		t.Fatalf("stale post: %d\n%s", resp.StatusCode, body)
	}
	cur, err := f.st.Get(ctx, "", "k1")
	if err != nil || cur.State != idem.StateUnknown || cur.AttemptID != again.AttemptID {
		t.Fatalf("a stale decision changed the record: %+v %v", cur, err)
	}
}

func TestResolveAuditTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{AuditLog: t.TempDir() + "/audit.jsonl"})
	f.login("alice")
	rec := f.unknown("", "k1", "charge", 0)
	_, page := f.get("/record?key=k1")
	csrf, ver := fields(t, page)
	resp, _ := f.decide(url.Values{"csrf": {csrf}, "key": {"k1"}, "fence": {fmt.Sprint(rec.Fence)}, "version": {ver},
		"as": {"failed"}, "reason": {"card declined per provider"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	_, page = f.get(resp.Header.Get("Location"))
	for _, want := range []string{"token:alice", "card declined per provider", "decided failed", "Resolved as failed"} {
		if !strings.Contains(page, want) {
			t.Errorf("record page after the decision lacks %q", want)
		}
	}
	if strings.Contains(page, `id="resolve-form"`) {
		t.Error("a decided record still offers the resolve form")
	}
}

// TestUnknownPaging lists 130 unknown records (and decided ones between
// them) 50 a page: every unknown record once, oldest first, no other.
func TestUnknownPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.login("alice")
	ctx := context.Background()
	var want []string
	for i := range 130 {
		key := fmt.Sprintf("u%03d", i)
		op := "charge"
		if i%10 == 0 {
			op = "refund"
		}
		f.unknown(fmt.Sprintf("scope%d", i%3), key, op, time.Duration(i/2)*time.Second) // pairs share a creation time
		want = append(want, key)
		if i%7 == 0 { // in flight: lease passed (unknown to every reader), or live
			for j, lease := range []time.Duration{time.Second, 48 * time.Hour} {
				k := fmt.Sprintf("run%03d-%d", i, j)
				now := t0.Add(time.Duration(i/2) * time.Second)
				if _, err := f.st.Claim(ctx, idem.ClaimParams{Scope: "scope0", Key: k, AttemptID: k, Now: now, LeaseUntil: now.Add(lease)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i%4 == 0 {
			k := fmt.Sprintf("done%03d", i)
			now := t0.Add(time.Duration(i/2) * time.Second)
			cr, _ := f.st.Claim(ctx, idem.ClaimParams{Key: k, AttemptID: k, Now: now, LeaseUntil: now.Add(time.Hour)})
			_, _ = f.st.Finish(ctx, idem.FinishParams{Key: k, Fence: cr.Record.Fence, AttemptID: k, State: idem.StateSucceeded, CompletedAt: now, ExpiresAt: now.Add(time.Hour)})
		}
	}
	var got []string
	next := "/unknown"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		_, body := f.get(next)
		for _, m := range regexp.MustCompile(`class="key" href="[^"]*">([^<]+)<`).FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		next = ""
		if m := regexp.MustCompile(`id="next-page" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	// The reference: every record in List order, kept when unknown to a
	// reader (same creation time sorts by scope, then key).
	all, err := f.st.List(ctx, idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for i := range all {
		if all[i].EffectiveState(time.Now()) == idem.StateUnknown {
			order = append(order, all[i].Key)
		}
	}
	if n := len(want) + 19; len(order) != n {
		t.Fatalf("test premise: %d records unknown to a reader, want %d", len(order), n)
	}
	if strings.Join(got, ",") != strings.Join(order, ",") {
		t.Fatalf("paged listing (%d) differs from the whole listing (%d):\n%v\n%v", len(got), len(order), got, order)
	}
	// The operation filter and the scope filter.
	_, body := f.get("/unknown?op=refund")
	if n := strings.Count(body, `class="key"`); n != 13 {
		t.Fatalf("op=refund lists %d records, want 13", n)
	}
	_, body = f.get("/unknown?scope=scope1")
	if n := strings.Count(body, `class="key"`); n != 43 {
		t.Fatalf("scope=scope1 lists %d records, want 43", n)
	}
	_, body = f.get("/unknown?scope=scope0")
	if n := strings.Count(body, `class="key"`); n != 50 || !strings.Contains(body, "run000-0") || strings.Contains(body, "run000-1") {
		t.Fatalf("scope=scope0 lists %d records (want a full page with the expired in-flight record, not the live one)", n)
	}
	_, body = f.get("/unknown?older=1h")
	if n := strings.Count(body, `class="key"`); n != 50 {
		t.Fatalf("older=1h lists %d records on its first page, want 50", n)
	}
	_, body = f.get("/unknown?older=3h")
	if n := strings.Count(body, `class="key"`); n != 0 {
		t.Fatalf("older=3h lists %d records, want 0", n)
	}
}

func TestOverviewCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.login("alice")
	f.unknown("", "k1", "charge", 0)
	f.unknown("", "k2", "charge", time.Minute)
	_, body := f.get("/")
	if !regexp.MustCompile(`id="count-unknown">\s*<div class="label">unknown</div>\s*<div class="value">2</div>`).MatchString(body) {
		t.Fatalf("overview does not count 2 unknown records:\n%s", body)
	}
	if !strings.Contains(body, `<svg class="chart"`) {
		t.Fatalf("overview has no chart")
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	s, err := parseMetrics(strings.NewReader(`# HELP idem_requests_total x
# TYPE idem_requests_total counter
idem_requests_total{operation="POST /a",outcome="first"} 7
idem_requests_total{operation="POST /b",outcome="first"} 3
idem_requests_total{operation="POST /a",outcome="replay"} 2
idem_duplicate_ratio 0.25
`))
	if err != nil || s.outcomes["first"] != 10 || s.outcomes["replay"] != 2 || !s.hasRatio || s.dupRatio != 0.25 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines 5\n")); err == nil {
		t.Fatal("an answer without idem metrics was accepted")
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"/unknown?x=1": "/unknown?x=1", "//evil.example": "/", "/\\evil": "/",
		"https://evil.example": "/", "": "/", "/\t/evil.example/": "/", "/\n/evil.example": "/", "/\r/evil": "/",
		"/ /evil": "/", "/\x00x": "/", "/%09/evil.example": "/%09/evil.example", "/\u00a0/evil": "/", "/\u2028/evil": "/",
		"/records?key=a%20b": "/records?key=a%20b", "/x/../y": "/x/../y"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOverviewReconcileReport shows a report as idem reconcile --json
// writes it (the reconcile package's own Report, encoded).
func TestOverviewReconcileReport(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "report.json")
	rep := reconcile.Report{StartedAt: t0, FinishedAt: t0.Add(3 * time.Second), Checked: 1234,
		Counts:     map[reconcile.Class]int{reconcile.ClassReconciled: 1200, reconcile.ClassDrift: 2, reconcile.ClassPending: 32},
		DriftCount: 2, DriftAmount: map[string]int64{"EUR": 1550}, OldestUnreconciledSeconds: 7200}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{ReconcileReport: path})
	f.login("alice")
	_, body := f.get("/")
	for _, want := range []string{"1,234", "1,200", "15.50 EUR", "2 finding(s)", "2h 0m"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview's reconciliation panel lacks %q", want)
		}
	}
}

// TestUnknownScanBound: a filter the store cannot apply (the operation)
// reads at most maxScan records for one page, then offers the next page
// from where it stopped, so a rare operation never makes one slow page.
func TestUnknownScanBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.login("alice")
	for i := range maxScan + 100 {
		f.unknown("", fmt.Sprintf("c%05d", i), "charge", time.Duration(i)*time.Millisecond)
	}
	for i := range 3 {
		f.unknown("", fmt.Sprintf("r%d", i), "refund", time.Hour+time.Duration(i)*time.Second)
	}
	_, body := f.get("/unknown?op=refund")
	next := regexp.MustCompile(`id="next-page" href="([^"]+)"`).FindStringSubmatch(body)
	if n := strings.Count(body, `class="key"`); n != 0 || next == nil || !strings.Contains(body, fmt.Sprintf("%d read", maxScan)) {
		t.Fatalf("first page of op=refund: %d records, next %v; want none after reading %d, and a next page", n, next, maxScan)
	}
	_, body = f.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if n := strings.Count(body, `class="key"`); n != 3 {
		t.Fatalf("second page of op=refund: %d records, want 3", n)
	}
}

// With RunningEvery, the unknown list takes in_progress records from a
// snapshot refreshed in the background: a record whose lease passed after
// New shows once a refresh has seen it, one whose lease is live never, and
// a stored unknown one at once.
func TestRunningSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{RunningEvery: 20 * time.Millisecond})
	f.login("alice")
	ctx := context.Background()
	now := time.Now().UTC().Add(-time.Minute)
	for k, lease := range map[string]time.Duration{"run-expired": time.Second, "run-live": time.Hour} {
		if _, err := f.st.Claim(ctx, idem.ClaimParams{Key: k, AttemptID: k, Now: now, LeaseUntil: now.Add(lease)}); err != nil {
			t.Fatal(err)
		}
	}
	f.unknown("", "stored-unknown", "charge", time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := f.get("/unknown")
		if !strings.Contains(body, ">stored-unknown<") {
			t.Fatalf("a stored unknown record is missing from the list:\n%s", body)
		}
		if strings.Contains(body, ">run-live<") {
			t.Fatal("an in_progress record with a live lease is listed as unknown")
		}
		if strings.Contains(body, ">run-expired<") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an in_progress record whose lease passed never showed: the snapshot is not refreshed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sn := f.s.running.Load(); sn == nil || len(sn.recs) != 2 {
		t.Fatalf("snapshot = %+v, want the two in_progress records", sn)
	}
}
