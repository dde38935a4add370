package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestUIConsoleInBrowser is the day after an outage, in a real browser:
// two charges were in flight when their proxy was killed (in_progress,
// their lease passed: unknown to every reader, listed from the
// dashboard's snapshot) and three refunds timed out (stored unknown). The
// operator searches by key prefix and by exact key; releases one killed
// charge and finds it gone from the list at once (before, the snapshot
// kept it for up to 10 s); looks a refund up at a fake provider (the
// reconciler's HTTP lookup) and decides it succeeded with the provider's
// object, which the client's retry then gets; and releases the rest in
// one bulk decision, previewed, with one reason. With
// IDEM_UI_SCREENSHOTS=DIR it writes the search, the bulk preview and the
// provider's view as PNGs there.
func TestUIConsoleInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	intent := []string{"--intent", "amount=/amount", "--intent", "currency=/currency", "--intent", "operation=/operation"}

	// Two charges in flight when the proxy dies.
	hold := make(chan struct{})
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/charges/hang":
			<-hold
		case "/v1/refunds":
			time.Sleep(1500 * time.Millisecond)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	t.Cleanup(func() { close(hold) })
	p1 := startProxy(t, append([]string{"--global-scope", "--upstream", up.URL, "--store", db, "--lease", "1s"}, intent...)...)
	for _, k := range []string{"o-2001", "o-2002"} {
		go func() {
			_, _ = trySend("POST", p1.url("/v1/charges/hang"), `"charge:v1:shop:`+k+`"`, `{"amount":1999,"currency":"EUR","operation":"charge"}`)
		}()
	}
	for range 2 {
		<-up.arrived
	}
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p1.done
	// Refunds that time out, and charges that succeed.
	p2 := startProxy(t, append([]string{"--global-scope", "--upstream", up.URL, "--store", db, "--upstream-timeout", "300ms"}, intent...)...)
	for i, k := range []string{"r-1", "r-2", "r-3"} {
		wantCode(t, send(t, "POST", p2.url("/v1/refunds"), `"refund:v1:shop:`+k+`"`, fmt.Sprintf(`{"amount":%d,"currency":"EUR","operation":"refund"}`, 1000+i*250)), 504, "")
	}
	for i, k := range []string{"o-1001", "o-1002", "o-1003"} {
		wantCode(t, send(t, "POST", p2.url("/v1/charges"), `"charge:v1:shop:`+k+`"`, fmt.Sprintf(`{"amount":%d,"currency":"EUR","operation":"charge"}`, 500+i*100)), 201, "")
	}
	time.Sleep(1100 * time.Millisecond) // the killed charges' lease passes

	// The provider knows refund r-1.
	const providerObj = `{"key":"refund:v1:shop:r-1","amount":1000,"currency":"EUR","status":"succeeded","applied_at":"2026-03-01T10:05:00Z","id":"re_77"}`
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/lookup/refund:v1:shop:r-1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(providerObj))
	}))
	t.Cleanup(provider.Close)

	tokenFile := filepath.Join(dir, "token")
	const token = "e2e-token-0123456789abcdef"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	u := startUI(t, "--store", db, "--token-file", tokenFile, "--audit-log", audit, "--provider-url", provider.URL+"/v1/lookup/{key}")
	browse(t, ctx, u, "log in", chromedp.Navigate(u.url("/login")), chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("operator"), "carol"), chromedp.SendKeys(chromedp.ID("token"), token))
	if st := submit(t, ctx, u, "log in", "#login-submit"); st != http.StatusOK {
		t.Fatalf("login landed on a %d page", st)
	}
	keys := func(what string) []string {
		return get(t, ctx, u, what, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("a.key")).map(a => a.textContent)`))
	}

	// Search: a key prefix, then one key exactly.
	browse(t, ctx, u, "search a prefix", chromedp.Navigate(u.url("/records")), chromedp.WaitVisible(chromedp.ID("search")),
		chromedp.SendKeys(chromedp.ID("q-key"), "refund:v1:"), chromedp.SetValue(chromedp.ID("q-match"), "prefix"))
	if st := submit(t, ctx, u, "search a prefix", "#search-submit"); st != http.StatusOK {
		t.Fatalf("search: %d", st)
	}
	if got := keys("read the search"); strings.Join(got, ",") != "refund:v1:shop:r-1,refund:v1:shop:r-2,refund:v1:shop:r-3" {
		t.Fatalf("prefix search found %v", got)
	}
	screenshot(t, ctx, u, "ui-search.png")
	browse(t, ctx, u, "search a key", chromedp.Navigate(u.url("/records?key=charge%3Av1%3Ashop%3Ao-1002&state=succeeded")), chromedp.WaitVisible(chromedp.ID("records-table")))
	if got := keys("read the search"); strings.Join(got, ",") != "charge:v1:shop:o-1002" {
		t.Fatalf("exact search found %v", got)
	}

	// A decision leaves the list at once.
	browse(t, ctx, u, "open the unknown list", chromedp.Navigate(u.url("/unknown")), chromedp.WaitVisible(chromedp.ID("unknown-table")))
	if got := keys("read the list"); len(got) != 5 || !strings.Contains(strings.Join(got, ","), "o-2001") {
		t.Fatalf("unknown list %v, want the two killed charges and three refunds", got)
	}
	browse(t, ctx, u, "open the killed charge", chromedp.Navigate(u.url("/record?scope=&key=charge%3Av1%3Ashop%3Ao-2001")),
		chromedp.WaitVisible(chromedp.ID("resolve-form")), chromedp.Click(chromedp.ID("as-released")),
		chromedp.SendKeys(chromedp.ID("reason"), "upstream has no charge for o-2001"))
	if st := submit(t, ctx, u, "release", "#resolve-submit"); st != http.StatusOK {
		t.Fatalf("release landed on a %d page", st)
	}
	browse(t, ctx, u, "after the release", chromedp.WaitVisible(chromedp.ID("flash")))
	if got := keys("read the list after the release"); len(got) != 4 || strings.Contains(strings.Join(got, ","), "o-2001") {
		t.Fatalf("right after its release the list shows %v: o-2001 must be gone at once", got)
	}

	// The provider's view of refund r-1, and a decision with its object.
	browse(t, ctx, u, "open refund r-1", chromedp.Navigate(u.url("/record?scope=&key=refund%3Av1%3Ashop%3Ar-1")),
		chromedp.WaitVisible(chromedp.ID("request")), chromedp.Click(chromedp.ID("lookup-link")), chromedp.WaitVisible(chromedp.ID("lookup")))
	if f := get(t, ctx, u, "read the lookup", chromedp.Text(chromedp.ID("lookup-found"))); f != "yes" {
		t.Fatalf("lookup found %q", f)
	}
	if raw := get(t, ctx, u, "read the object", chromedp.Text(chromedp.ID("lookup-raw"))); !strings.Contains(raw, `"re_77"`) {
		t.Fatalf("the provider's object is not shown: %q", raw)
	}
	browse(t, ctx, u, "decide with the provider's object", chromedp.SetValue(chromedp.ID("lookup-status-in"), "201"),
		chromedp.SendKeys(chromedp.ID("lookup-reason"), "provider shows re_77"))
	screenshot(t, ctx, u, "ui-provider.png")
	// The lookup's form goes to the preview of what retries will receive;
	// the decision is recorded from there.
	if st := submit(t, ctx, u, "preview", "#lookup-submit"); st != http.StatusOK {
		t.Fatalf("the preview landed on a %d page", st)
	}
	if pv := get(t, ctx, u, "read the preview", chromedp.Text(chromedp.ID("preview-body"))); pv != providerObj {
		t.Fatalf("the preview shows %q, want the provider's object", pv)
	}
	if st := submit(t, ctx, u, "decide", "#resolve-submit"); st != http.StatusOK {
		t.Fatalf("decision landed on a %d page", st)
	}
	if st := get(t, ctx, u, "read the state", chromedp.Text(chromedp.ID("record-state"))); st != "succeeded" {
		t.Fatalf("after the decision the refund is %q", st)
	}
	r := send(t, "POST", p2.url("/v1/refunds"), `"refund:v1:shop:r-1"`, `{"amount":1000,"currency":"EUR","operation":"refund"}`)
	if r.status != 201 || r.body != providerObj || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry of r-1: %d %s", r.status, r.body)
	}

	// A bulk release of the rest: select all, one reason, preview, confirm.
	browse(t, ctx, u, "select all", chromedp.Navigate(u.url("/unknown")), chromedp.WaitVisible(chromedp.ID("unknown-table")),
		chromedp.Click(chromedp.ID("select-all")), chromedp.Click(chromedp.ID("bulk-as-released")),
		chromedp.SendKeys(chromedp.ID("bulk-reason"), "outage 10:02-10:14: nothing reached the provider"))
	if n := get(t, ctx, u, "count the selection", chromedp.Evaluate[int](`document.querySelectorAll("input.sel-row:checked").length`)); n != 3 {
		t.Fatalf("select all checked %d records, want 3", n)
	}
	if st := submit(t, ctx, u, "preview", "#bulk-preview"); st != http.StatusOK {
		t.Fatalf("preview: %d", st)
	}
	sum := get(t, ctx, u, "read the preview", chromedp.Text(chromedp.ID("bulk-summary")))
	if !strings.Contains(sum, "3 record(s) will be decided released") {
		t.Fatalf("preview says %q", sum)
	}
	screenshot(t, ctx, u, "ui-bulk-preview.png")
	if st := submit(t, ctx, u, "confirm", "#bulk-apply"); st != http.StatusOK {
		t.Fatalf("confirm: %d", st)
	}
	if sum := get(t, ctx, u, "read the outcome", chromedp.Text(chromedp.ID("bulk-summary"))); !strings.Contains(sum, "3 applied, 0 skipped, 0 failed") {
		t.Fatalf("bulk outcome %q", sum)
	}
	browse(t, ctx, u, "the list after the bulk release", chromedp.Click(chromedp.ID("bulk-back")), chromedp.WaitVisible(chromedp.ID("no-unknown")))
	if b, err := os.ReadFile(audit); err != nil || strings.Count(string(b), "nothing reached the provider") != 3 {
		t.Fatalf("audit log: %v\n%s", err, b)
	}
}
