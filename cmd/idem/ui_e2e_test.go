package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/idemkit/idem/internal/testenv"
)

// chromiumPath is the browser the dashboard's end-to-end test drives:
// Debian's chromium package (with chromium-driver), never a download.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("IDEM_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		msg := "headless Chromium not found at " + p + " (apt-get install chromium chromium-driver, or set IDEM_CHROMIUM)"
		if testenv.Required() {
			t.Fatalf("%s — failing because IDEM_REQUIRE_SERVICES=1", msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return p
}

// uiProc is a running `idem ui`.
type uiProc struct {
	addr string
	mu   sync.Mutex
	log  strings.Builder
}

func (u *uiProc) logs() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.log.String()
}

var uiAddrRE = regexp.MustCompile(`msg="idem ui listening" addr=(\S+)`)

func startUI(t *testing.T, args ...string) *uiProc {
	t.Helper()
	cmd := exec.Command(idemBin, append([]string{"ui", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &uiProc{}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			u.mu.Lock()
			u.log.WriteString(sc.Text() + "\n")
			if m := uiAddrRE.FindStringSubmatch(sc.Text()); m != nil && !once {
				u.addr, once = m[1], true
				close(ready)
			}
			u.mu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("idem ui exited before listening:\n%s", u.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("idem ui did not start:\n%s", u.logs())
	}
	return u
}

func (u *uiProc) url(path string) string { return "http://" + u.addr + path }

// browser starts headless Chromium with a fresh profile and the flags that
// keep it off the network it has no business with.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser; no deadline on this first call
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// stepTimeout bounds one group of browser steps; generous, for a loaded
// machine.
const stepTimeout = 90 * time.Second

func browse(t *testing.T, ctx context.Context, u *uiProc, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v\nidem ui log:\n%s", what, err, u.logs())
	}
}

// get runs one action that returns a value.
func get[T any](t *testing.T, ctx context.Context, u *uiProc, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v\nidem ui log:\n%s", what, err, u.logs())
	}
	return v
}

// submit clicks a form's button and returns the status of the page it
// loads.
func submit(t *testing.T, ctx context.Context, u *uiProc, what, button string) int64 {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(sctx, chromedp.Click(chromedp.CSS(button)))
	if err != nil {
		t.Fatalf("%s: %v\nidem ui log:\n%s", what, err, u.logs())
	}
	return resp.Status
}

// TestUIInBrowser is an operator's round in a real browser: a proxy is
// killed while the upstream applies a payment, and the record is unknown.
// A wrong password is refused; the operator logs in with their own (an
// operators file made with idem ui passwd), sees the record counted and
// listed, opens it, is refused an empty succeeded, previews the
// provider's answer as the next retry will receive it, and resolves it
// succeeded with a reason; the count drops, the audit trail names the
// verified operator and its chain verifies, and the client's retry
// through the proxy replays exactly the preview without reaching the
// upstream again. A viewer logged in next sees the records and no form.
// A form posted without its CSRF token, or on a record that changed since
// the page was loaded, is refused; a page asked for without a login goes
// to the login.
// With IDEM_UI_SCREENSHOTS=DIR it writes the overview and the record page
// as PNGs there (docs/ holds the committed ones).
func TestUIInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	intent := []string{"--intent", "amount=/amount", "--intent", "currency=/currency", "--intent", "operation=/operation", "--admin", "127.0.0.1:0"}
	up, p2 := killMidEffect(t, db, "/v1/charges", `"charge:v1:shop:o-1042"`,
		`{"amount":4999,"currency":"EUR","operation":"charge","customer":"cus_81"}`, `{"id":"ch_upstream"}`, intent...)
	// A few recorded requests, and two more unknown records: the upstream
	// hangs past the proxy's timeout on /v1/refunds.
	slow := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/refunds" {
			time.Sleep(1500 * time.Millisecond)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	p3 := startProxy(t, append([]string{"--global-scope", "--upstream", slow.URL, "--store", db, "--upstream-timeout", "300ms"}, intent[:6]...)...)
	for i, k := range []string{"o-1043", "o-1044", "o-1045", "o-1046"} {
		wantCode(t, send(t, "POST", p3.url("/v1/charges"), `"charge:v1:shop:`+k+`"`, `{"amount":`+[]string{"1200", "830", "15000", "2400"}[i]+`,"currency":"EUR","operation":"charge"}`), 201, "")
	}
	wantCode(t, send(t, "POST", p3.url("/v1/refunds"), `"refund:v1:shop:o-977"`, `{"amount":2500,"currency":"EUR","operation":"refund"}`), 504, "")
	wantCode(t, send(t, "POST", p3.url("/v1/refunds"), `"refund:v1:shop:o-978"`, `{"amount":700,"currency":"EUR","operation":"refund"}`), 504, "")
	for range 3 { // duplicates, for the metrics
		send(t, "POST", p2.url("/v1/charges"), `"charge:v1:shop:o-1043"`, `{"amount":1200,"currency":"EUR","operation":"charge"}`)
	}

	// A reconciliation report, from a real run over a provider file that
	// lists none of the unknown charges yet.
	csvFile := filepath.Join(dir, "balance.csv")
	if err := os.WriteFile(csvFile, []byte("id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,idempotency_key (metadata)\n"+
		"txn_1,charge,ch_1,12.00,0.61,11.39,eur,"+time.Now().UTC().Format(time.DateTime)+",Order 1043,charge:v1:shop:o-1043\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, errOut, code := cli(t, "reconcile", "--store", db, "--provider-csv", csvFile, "--provider-format", "stripe-balance", "--settlement-window", "48h", "--json")
	if code != 0 && code != exitFindings {
		t.Fatalf("idem reconcile: %d\n%s%s", code, rep, errOut)
	}
	report := filepath.Join(dir, "reconcile.json")
	if err := os.WriteFile(report, []byte(rep), 0o600); err != nil {
		t.Fatal(err)
	}

	// Two operators, their lines made by idem ui passwd from a pipe.
	const alicePW, victorPW = "alice-e2e-password", "victor-e2e-password"
	var opsLines string
	for _, o := range [][3]string{{"alice", alicePW, "decider"}, {"victor", victorPW, "viewer"}} {
		line, errOut, code := passwd(t, o[1]+"\n", o[0], "--role", o[2])
		if code != 0 {
			t.Fatalf("idem ui passwd %s: %d %s", o[0], code, errOut)
		}
		opsLines += line
	}
	opsFile := filepath.Join(dir, "operators")
	if err := os.WriteFile(opsFile, []byte(opsLines), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	u := startUI(t, "--store", db, "--operators-file", opsFile, "--audit-log", audit, "--reconcile-report", report,
		"--metrics-url", "http://"+p2.admin+"/metrics", "--metrics-every", "1s")

	// Without a login every page goes to the login form.
	browse(t, ctx, u, "open /unknown without a login", chromedp.Navigate(u.url("/unknown")), chromedp.WaitVisible(chromedp.ID("login")))
	if loc := get(t, ctx, u, "location", chromedp.Location()); !strings.Contains(loc, "/login?next=") {
		t.Fatalf("/unknown without a login landed on %s", loc)
	}
	// A wrong password is refused, with the answer an unknown name gets.
	browse(t, ctx, u, "log in wrongly", chromedp.SendKeys(chromedp.ID("operator"), "alice"), chromedp.SendKeys(chromedp.ID("password"), victorPW))
	if st := submit(t, ctx, u, "log in wrongly", "#login-submit"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong password landed on a %d page, want 401", st)
	}
	if msg := get(t, ctx, u, "read the refusal", chromedp.Text(chromedp.ID("problem"))); msg != "Wrong operator name or password." {
		t.Fatalf("wrong password: %q", msg)
	}
	browse(t, ctx, u, "log in", chromedp.WaitVisible(chromedp.ID("login")), chromedp.SendKeys(chromedp.ID("operator"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), alicePW))
	if st := submit(t, ctx, u, "log in", "#login-submit"); st != http.StatusOK {
		t.Fatalf("login landed on a %d page", st)
	}
	browse(t, ctx, u, "after login", chromedp.WaitVisible(chromedp.ID("unknown-table")))

	count := func() string {
		browse(t, ctx, u, "open the overview", chromedp.Navigate(u.url("/")), chromedp.WaitVisible(chromedp.ID("count-unknown")))
		return strings.TrimSpace(get(t, ctx, u, "read the unknown count", chromedp.Text(chromedp.CSS("#count-unknown .value"))))
	}
	if c := count(); c != "3" {
		t.Fatalf("overview counts %q unknown records, want 3", c)
	}
	// The list, oldest first: the killed charge first.
	browse(t, ctx, u, "list", chromedp.Navigate(u.url("/unknown")), chromedp.WaitVisible(chromedp.ID("unknown-table")))
	keys := get(t, ctx, u, "read the list", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("a.key")).map(a => a.textContent)`))
	if len(keys) != 3 || keys[0] != "charge:v1:shop:o-1042" {
		t.Fatalf("unknown list %v, want the killed charge first of 3", keys)
	}

	// A form posted without its CSRF token is refused.
	browse(t, ctx, u, "open the charge", chromedp.Click(chromedp.CSS("a.key")), chromedp.WaitVisible(chromedp.ID("resolve-form")),
		chromedp.Click(chromedp.ID("as-released")), chromedp.SendKeys(chromedp.ID("reason"), "testing"))
	get(t, ctx, u, "drop the CSRF token", chromedp.Evaluate[bool](`(document.querySelector('#resolve-form input[name="csrf"]').value = "", true)`))
	if st := submit(t, ctx, u, "post without CSRF", "#resolve-submit"); st != http.StatusForbidden {
		t.Fatalf("post without the CSRF token: %d, want 403", st)
	}
	if msg := get(t, ctx, u, "read the refusal", chromedp.Text(chromedp.ID("problem"))); !strings.Contains(msg, "CSRF") {
		t.Fatalf("post without the CSRF token: %q", msg)
	}

	// A stale form: the page of refund o-977 is loaded, then the record is
	// released and the same request made unknown again — fence 1 again —
	// before the operator submits.
	refund := u.url("/record?scope=&key=refund%3Av1%3Ashop%3Ao-977")
	browse(t, ctx, u, "open the refund", chromedp.Navigate(refund), chromedp.WaitVisible(chromedp.ID("resolve-form")))
	if out, errOut, code := cli(t, "resolve", "refund:v1:shop:o-977", "--store", db, "--as", "released", "--reason", "retry it", "--actor", "bob"); code != 0 {
		t.Fatalf("idem resolve: %d\n%s%s", code, out, errOut)
	}
	wantCode(t, send(t, "POST", p3.url("/v1/refunds"), `"refund:v1:shop:o-977"`, `{"amount":2500,"currency":"EUR","operation":"refund"}`), 504, "")
	browse(t, ctx, u, "fill a stale decision", chromedp.Click(chromedp.ID("as-failed")), chromedp.SendKeys(chromedp.ID("reason"), "provider declined"))
	if st := submit(t, ctx, u, "post a stale decision", "#resolve-submit"); st != http.StatusConflict {
		t.Fatalf("stale decision: %d, want 409", st)
	}
	if msg := get(t, ctx, u, "read the refusal", chromedp.Text(chromedp.ID("problem"))); !strings.Contains(msg, "changed since you loaded") {
		t.Fatalf("stale decision: %q", msg)
	}
	if out, _, _ := cli(t, "get", "refund:v1:shop:o-977", "--store", db); !strings.Contains(out, "unknown") {
		t.Fatalf("a refused decision changed the record:\n%s", out)
	}
	if c := count(); c != "3" {
		t.Fatalf("after the refused decisions the overview counts %q unknown records, want 3", c)
	}
	if os.Getenv("IDEM_UI_SCREENSHOTS") != "" {
		// Traffic over a few scrapes, so that the chart has a shape.
		for i := range 10 {
			for j := range i%4 + 1 {
				k := fmt.Sprintf(`"charge:v1:shop:s-%d-%d"`, i, j)
				send(t, "POST", p2.url("/v1/orders"), k, `{"amount":100,"currency":"EUR","operation":"order"}`)
				for range (i + j) % 3 {
					send(t, "POST", p2.url("/v1/orders"), k, `{"amount":100,"currency":"EUR","operation":"order"}`)
				}
			}
			time.Sleep(1100 * time.Millisecond)
		}
		browse(t, ctx, u, "reload the overview", chromedp.Navigate(u.url("/")), chromedp.WaitVisible(chromedp.ID("count-unknown")))
	}
	screenshot(t, ctx, u, "ui-overview.png")

	// Open the killed charge and resolve it.
	browse(t, ctx, u, "open the charge", chromedp.Navigate(u.url("/unknown")), chromedp.WaitVisible(chromedp.ID("unknown-table")),
		chromedp.Click(chromedp.CSS("a.key")), chromedp.WaitVisible(chromedp.ID("resolve-form")))
	if st := get(t, ctx, u, "read the state", chromedp.Text(chromedp.ID("record-state"))); st != "unknown" {
		t.Fatalf("record page state %q", st)
	}
	// An empty succeeded is refused: every retry would get 201 and nothing.
	browse(t, ctx, u, "fill an empty success", chromedp.Click(chromedp.ID("as-succeeded")), chromedp.SetValue(chromedp.ID("status"), "201"),
		chromedp.SendKeys(chromedp.ID("reason"), "provider dashboard shows ch_3PqL9x captured"))
	if st := submit(t, ctx, u, "preview an empty success", "#preview-submit"); st != http.StatusBadRequest {
		t.Fatalf("empty succeeded: %d, want 400", st)
	}
	if msg := get(t, ctx, u, "read the refusal", chromedp.Text(chromedp.ID("problem"))); !strings.Contains(msg, "An empty body on succeeded is refused") {
		t.Fatalf("empty succeeded: %q", msg)
	}
	if out, _, _ := cli(t, "get", "charge:v1:shop:o-1042", "--store", db); !strings.Contains(out, "unknown") {
		t.Fatalf("a refused empty success changed the record:\n%s", out)
	}
	// The call spoke JSON (the proxy recorded its media type): a text
	// answer is refused.
	browse(t, ctx, u, "fill a text answer", chromedp.SetValue(chromedp.ID("body"), "captured"))
	if st := submit(t, ctx, u, "preview a text answer", "#preview-submit"); st != http.StatusBadRequest {
		t.Fatalf("text answer to a JSON call: %d, want 400", st)
	}
	if msg := get(t, ctx, u, "read the refusal", chromedp.Text(chromedp.ID("problem"))); !strings.Contains(msg, "not valid JSON") || !strings.Contains(msg, "request application/json") {
		t.Fatalf("text answer to a JSON call: %q", msg)
	}
	// The provider's answer, pasted; the preview shows what retries get.
	const answer = `{"id":"ch_3PqL9x","paid":true}`
	browse(t, ctx, u, "fill the decision", chromedp.SetValue(chromedp.ID("body"), answer))
	if st := submit(t, ctx, u, "preview", "#preview-submit"); st != http.StatusOK {
		t.Fatalf("preview landed on a %d page", st)
	}
	pvStatus := get(t, ctx, u, "read the preview", chromedp.Text(chromedp.ID("preview-status")))
	pvHeaders := get(t, ctx, u, "read the preview", chromedp.Text(chromedp.ID("preview-headers")))
	pvBody := get(t, ctx, u, "read the preview", chromedp.Text(chromedp.ID("preview-body")))
	if pvStatus != "HTTP 201" || !strings.Contains(pvHeaders, "application/json") || pvBody != answer {
		t.Fatalf("preview: %q %q %q", pvStatus, pvHeaders, pvBody)
	}
	screenshot(t, ctx, u, "ui-record.png")
	if st := submit(t, ctx, u, "resolve", "#resolve-submit"); st != http.StatusOK {
		t.Fatalf("resolve landed on a %d page", st)
	}
	browse(t, ctx, u, "after resolving", chromedp.WaitVisible(chromedp.ID("flash")))
	state := get(t, ctx, u, "read the state", chromedp.Text(chromedp.ID("record-state")))
	hist := get(t, ctx, u, "read the history", chromedp.Text(chromedp.ID("history")))
	if state != "succeeded" || !strings.Contains(hist, "alice") || !strings.Contains(hist, "ch_3PqL9x captured") {
		t.Fatalf("after resolving: state %q, history %q", state, hist)
	}
	if c := count(); c != "2" {
		t.Fatalf("after resolving the overview counts %q unknown records, want 2", c)
	}
	if !strings.Contains(u.logs(), `actor=alice`) || !strings.Contains(u.logs(), "ch_3PqL9x captured") {
		t.Fatalf("the ui's log does not name the operator and the reason:\n%s", u.logs())
	}
	if b, err := os.ReadFile(audit); err != nil || !strings.Contains(string(b), `"operator":"alice","role":"decider"`) {
		t.Fatalf("audit log: %v\n%s", err, b)
	}
	out, errOut, code := cli(t, "ui", "verify-log", audit)
	if code != 0 || !strings.Contains(out, "intact, 1 lines, head ") {
		t.Fatalf("verify-log: %d %s%s", code, out, errOut)
	}
	// The head verify-log reports is the one the dashboard logged: the
	// anchor an operator keeps elsewhere.
	if head := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:]); !strings.Contains(u.logs(), "head="+head) {
		t.Fatalf("the dashboard did not log the audit log's head %s:\n%s", head, u.logs())
	}

	// The client's retry replays the decision; the upstream is not asked again.
	r := send(t, "POST", p2.url("/v1/charges"), `"charge:v1:shop:o-1042"`, `{"amount":4999,"currency":"EUR","operation":"charge","customer":"cus_81"}`)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || r.body != answer || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("retry after the decision: %d %q %s", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	if n := up.count("/v1/charges"); n != 1 {
		t.Fatalf("upstream saw %d charges, want exactly 1", n)
	}

	// Without the session cookie, pages go to the login again.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, u, "open / without a session", chromedp.Navigate(u.url("/")), chromedp.WaitVisible(chromedp.ID("login")))
	if loc := get(t, ctx, u, "location", chromedp.Location()); !strings.Contains(loc, "/login") {
		t.Fatalf("/ without a session landed on %s", loc)
	}

	// The second operator, a viewer: the records, and no form.
	browse(t, ctx, u, "log in as victor", chromedp.SendKeys(chromedp.ID("operator"), "victor"), chromedp.SendKeys(chromedp.ID("password"), victorPW))
	if st := submit(t, ctx, u, "log in as victor", "#login-submit"); st != http.StatusOK {
		t.Fatalf("victor's login landed on a %d page", st)
	}
	browse(t, ctx, u, "victor opens a refund", chromedp.Navigate(refund), chromedp.WaitVisible(chromedp.ID("viewer-note")))
	if who := get(t, ctx, u, "read who", chromedp.Text(chromedp.CSS(".who strong"))); who != "victor" {
		t.Fatalf("signed in as %q, want victor", who)
	}
	if n := get(t, ctx, u, "count forms", chromedp.Evaluate[int](`document.querySelectorAll("#resolve-form").length`)); n != 0 {
		t.Fatal("a viewer is offered the decision form")
	}
}

// screenshot writes the page as a PNG into $IDEM_UI_SCREENSHOTS, if set.
func screenshot(t *testing.T, ctx context.Context, u *uiProc, name string) {
	t.Helper()
	dir := os.Getenv("IDEM_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := get(t, ctx, u, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
