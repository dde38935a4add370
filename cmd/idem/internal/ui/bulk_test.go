package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/reconcile/httpprovider"
)

var (
	selR     = regexp.MustCompile(`name="sel" value="([^"]+)"`)
	hiddenR  = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	listCSRF = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
)

// selections reads a list page's bulk checkboxes by key.
func selections(t *testing.T, f *fixture, page string) (csrf string, sel map[string]string) {
	t.Helper()
	_, body := f.get(page)
	c := listCSRF.FindStringSubmatch(body)
	if c == nil {
		t.Fatalf("%s has no CSRF token:\n%s", page, body)
	}
	sel = map[string]string{}
	for _, m := range selR.FindAllStringSubmatch(body, -1) {
		_, key, _, ok := parseSel(m[1])
		if !ok {
			t.Fatalf("checkbox value %q does not parse", m[1])
		}
		sel[key] = m[1]
	}
	return c[1], sel
}

// confirmForm reads the preview's confirmation form as a browser posts it.
func confirmForm(t *testing.T, preview string) url.Values {
	t.Helper()
	i := strings.Index(preview, `id="bulk-confirm"`)
	if i < 0 {
		t.Fatalf("the preview has no confirmation form:\n%s", preview)
	}
	v := url.Values{}
	for _, m := range hiddenR.FindAllStringSubmatch(preview[i:], -1) {
		v.Add(m[1], htmlUnescape(m[2]))
	}
	return v
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&#43;", "+", "&amp;", "&").Replace(s)
}

func (f *fixture) getRec(scope, key string) *idem.Record {
	f.t.Helper()
	r, err := f.st.Get(context.Background(), scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// A bulk release: three unknown records selected on the list, one reason,
// a preview, a confirmation. Two change between the preview and the
// confirmation (one decided by someone else, one released and claimed
// anew, unknown again): they are skipped and reported, not overwritten;
// the third is released and logged in the audit trail with the reason.
func TestBulkReleaseSkipsWhatChanged(t *testing.T) {
	t.Parallel()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	f := consoleFixture(t, Config{AuditLog: audit})
	f.login("alice")
	for i, k := range []string{"b-1", "b-2", "b-3"} {
		f.unknown("", k, "charge", time.Duration(i)*time.Second)
	}
	csrf, sel := selections(t, f, "/unknown")
	if len(sel) != 3 {
		t.Fatalf("the list offers %d checkboxes, want 3", len(sel))
	}
	resp, preview := f.post("/bulk/preview", url.Values{"csrf": {csrf}, "sel": {sel["b-1"], sel["b-2"], sel["b-3"]},
		"as": {"released"}, "reason": {"upstream down 10:02-10:14, nothing charged"}, "back": {"/unknown"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(preview, "3 record(s) will be decided <strong>released</strong>") {
		t.Fatalf("preview: %d\n%s", resp.StatusCode, preview)
	}
	if f.getRec("", "b-1") == nil {
		t.Fatal("the preview changed a record")
	}
	// Meanwhile someone decides b-3 on its own page, and b-2 is released
	// and its request made again, unknown again: the same key and state,
	// fence 1 again, but another record.
	f.decideOnPage("", "b-3", url.Values{"as": {"failed"}, "reason": {"declined at the bank"}})
	f.decideOnPage("", "b-2", url.Values{"as": {"released"}, "reason": {"retry it"}})
	f.unknown("", "b-2", "charge", time.Minute)
	resp, done := f.post("/bulk/apply", confirmForm(t, preview))
	if resp.StatusCode != http.StatusOK || !strings.Contains(done, "1 applied, 2 skipped, 0 failed") {
		t.Fatalf("apply: %d\n%s", resp.StatusCode, done)
	}
	for _, k := range []string{"b-2", "b-3"} {
		if !regexp.MustCompile(`data-key="` + k + `">(?s:.)*?changed since it was shown`).MatchString(done) {
			t.Fatalf("the skipped record %s is not reported with why:\n%s", k, done)
		}
	}
	if f.getRec("", "b-1") != nil {
		t.Fatal("b-1 was not released")
	}
	if r := f.getRec("", "b-2"); r == nil || r.State != idem.StateUnknown || !r.CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("b-2, claimed anew since the preview, is now %+v: the bulk decision overwrote it", r)
	}
	if r := f.getRec("", "b-3"); r == nil || r.State != idem.StateFailed {
		t.Fatalf("b-3, decided failed by someone else, is now %+v: the bulk decision overwrote it", r)
	}
	log, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), `"reason":"upstream down 10:02-10:14, nothing charged"`); n != 1 {
		t.Fatalf("the audit log has %d bulk entries, want 1:\n%s", n, log)
	}
}

// A bulk succeeded never invents a body: without one it is refused, with a
// body that is not JSON each record is left out, and with a valid body the
// preview shows exactly what retries replay, and applies it.
func TestBulkSucceededNeedsARealBody(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{})
	f.login("alice")
	f.unknown("", "s-1", "charge", 0)
	f.unknown("", "s-2", "charge", time.Second)
	csrf, sel := selections(t, f, "/unknown")
	form := func(extra ...string) url.Values {
		v := url.Values{"csrf": {csrf}, "sel": {sel["s-1"], sel["s-2"]}, "as": {"succeeded"}, "reason": {"charged, per the bank"}}
		for i := 0; i < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	if resp, body := f.post("/bulk/preview", form()); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "never invents one") {
		t.Fatalf("succeeded without a body: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := f.post("/bulk/preview", form("body", "{paid: true", "status", "201")); resp.StatusCode != http.StatusOK ||
		strings.Count(body, "refused: "+msgInvalidJSON) != 2 || strings.Contains(body, `id="bulk-apply"`) {
		t.Fatalf("succeeded with a body that is not JSON: %d\n%s", resp.StatusCode, body)
	}
	if _, body := f.post("/bulk/preview", form("body", `{"paid": true}`, "as", "released", "reason", "")); !strings.Contains(body, "A reason is required") {
		t.Fatalf("no reason:\n%s", body)
	}
	_, preview := f.post("/bulk/preview", form("body", `{"id":"ch_1","paid":true}`, "status", "201"))
	if strings.Count(preview, "HTTP 201 · Content-Type: application/json") != 2 || !strings.Contains(preview, "{&#34;id&#34;:&#34;ch_1&#34;,&#34;paid&#34;:true}") {
		t.Fatalf("the preview does not show what retries replay:\n%s", preview)
	}
	if _, done := f.post("/bulk/apply", confirmForm(t, preview)); !strings.Contains(done, "2 applied, 0 skipped, 0 failed") {
		t.Fatalf("apply:\n%s", done)
	}
	for _, k := range []string{"s-1", "s-2"} {
		r := f.getRec("", k)
		resp, err := idemhttp.DecodeResponse(r.Result)
		if r.State != idem.StateSucceeded || err != nil || resp.Status != 201 || string(resp.Body) != `{"id":"ch_1","paid":true}` {
			t.Fatalf("%s: %s %v %+v", k, r.State, err, resp)
		}
	}
}

// fakeProvider answers the reconciler's HTTP lookup: 200 with an entry for
// the keys it applied, 404 for the others.
func fakeProvider(t *testing.T, applied map[string]string) *httpprovider.Provider {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := strings.TrimPrefix(r.URL.Path, "/v1/lookup/")
		obj, ok := applied[k]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, obj)
	}))
	t.Cleanup(api.Close)
	p, err := httpprovider.New(httpprovider.Config{URLTemplate: api.URL + "/v1/lookup/{key}"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const providerObj = `{"key":"p-1","amount":1250,"currency":"EUR","status":"succeeded","applied_at":"2026-03-01T12:00:00Z","id":"ch_9"}`

// A bulk succeeded with the provider's object: each record gets its own
// object as the body; one the provider never applied is left out.
func TestBulkSucceededFromTheProvider(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{Provider: fakeProvider(t, map[string]string{"p-1": providerObj})})
	f.login("alice")
	f.unknown("", "p-1", "charge", 0)
	f.unknown("", "p-2", "charge", time.Second)
	csrf, sel := selections(t, f, "/unknown")
	_, preview := f.post("/bulk/preview", url.Values{"csrf": {csrf}, "sel": {sel["p-1"], sel["p-2"]}, "as": {"succeeded"},
		"use_provider": {"1"}, "status": {"201"}, "reason": {"provider confirms"}})
	if !strings.Contains(preview, "1 record(s) will be decided") || !strings.Contains(preview, "the provider never applied") ||
		!strings.Contains(preview, "ch_9") {
		t.Fatalf("preview:\n%s", preview)
	}
	if _, done := f.post("/bulk/apply", confirmForm(t, preview)); !strings.Contains(done, "1 applied, 0 skipped, 0 failed") {
		t.Fatalf("apply:\n%s", done)
	}
	r := f.getRec("", "p-1")
	resp, err := idemhttp.DecodeResponse(r.Result)
	if err != nil || resp.Status != 201 || string(resp.Body) != providerObj {
		t.Fatalf("p-1 replays %+v (%v), want the provider's object", resp, err)
	}
	if r := f.getRec("", "p-2"); r.State != idem.StateUnknown {
		t.Fatalf("p-2, never applied at the provider, is %s", r.State)
	}
}

// The record page links to the provider's view: found (status, amount
// against the intent, the raw object) with a form that decides succeeded
// with it, or never applied.
func TestProviderLookupPage(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{Provider: fakeProvider(t, map[string]string{"p-1": providerObj})})
	f.login("alice")
	f.unknown("", "p-1", "charge", 0)
	f.unknown("", "p-2", "charge", time.Second)
	_, page := f.get(recordLink("", "p-1"))
	if !strings.Contains(page, `id="lookup-link"`) {
		t.Fatalf("the record page does not link to the provider:\n%s", page)
	}
	_, body := f.get("/record/lookup?scope=&key=p-1")
	for _, want := range []string{`id="lookup-found">yes`, `id="lookup-status">applied`, "12.50 EUR", "matches the intent", "&#34;ch_9&#34;", `id="lookup-form"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the lookup page lacks %q:\n%s", want, body)
		}
	}
	form := confirmFormID(t, body, "lookup-form")
	form.Set("status", "201")
	form.Set("content_type", "application/json")
	form.Set("body", providerObj)
	form.Set("reason", "the provider has it")
	if resp, b := f.decide(form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("deciding with the provider's object: %d\n%s", resp.StatusCode, b)
	}
	if r := f.getRec("", "p-1"); r.State != idem.StateSucceeded {
		t.Fatalf("p-1 is %s", r.State)
	}
	if _, body = f.get("/record/lookup?scope=&key=p-2"); !strings.Contains(body, "never applied it") || strings.Contains(body, `id="lookup-form"`) {
		t.Fatalf("a key the provider never applied:\n%s", body)
	}
	g := consoleFixture(t, Config{})
	g.login("bob")
	if resp, body := g.get("/record/lookup?scope=&key=p-1"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "--provider-url") {
		t.Fatalf("without a provider: %d\n%s", resp.StatusCode, body)
	}
}

func confirmFormID(t *testing.T, page, id string) url.Values {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no form %s:\n%s", id, page)
	}
	v := url.Values{}
	for _, m := range hiddenR.FindAllStringSubmatch(page[i:], -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	return v
}

// The record page shows the request as far as it was recorded, and says
// what was not; an intent encrypted at rest names its key.
func TestRecordPageRequest(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{})
	f.login("alice")
	f.unknown("", "r-1", "charge", 0)
	_, page := f.get(recordLink("", "r-1"))
	i := strings.Index(page, `id="request"`)
	if i < 0 || !strings.Contains(page[i:], "POST") || !strings.Contains(page[i:], "/v1/charges") || strings.Count(page[i:], "not recorded") < 2 {
		t.Fatalf("the request section:\n%s", page)
	}
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Microsecond)
	kr, err := idem.NewKeyring(idem.EncryptionKey{ID: "k2026", Secret: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := kr.SealIntent("", "r-2", []byte(`{"operation":"charge"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Claim(ctx, idem.ClaimParams{Key: "r-2", AttemptID: "a", Intent: sealed, Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, page = f.get(recordLink("", "r-2")); !strings.Contains(page, "Encrypted at rest with key <code>k2026</code>") {
		t.Fatalf("a sealed intent:\n%s", page)
	}
}
