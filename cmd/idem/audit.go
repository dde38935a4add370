package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/burst"
	"github.com/idemkit/idem/internal/jsonmembers"
)

// auditOpts are idem audit's flags.
type auditOpts struct {
	sandbox, requireKey, slow, asJSON bool
	method, path, bodyFile, bodyJSON  string
	effectsURL, asA, asB              string
	headers                           headerFlag
	concurrency, maxRequests          int
	rate                              float64
	ttl, timeout                      *time.Duration
}

// headerFlag collects repeated NAME=VALUE (or "NAME: VALUE") headers.
type headerFlag []string

func (h *headerFlag) String() string     { return "" }
func (h *headerFlag) Set(s string) error { *h = append(*h, s); return nil }

// parseHeader splits NAME=VALUE or "NAME: VALUE".
func parseHeader(s string) (name, value string, err error) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 || !isToken(s[:i]) {
		return "", "", fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	return s[:i], strings.TrimSpace(s[i+1:]), nil
}

func cmdAudit(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("audit",
		"idem audit URL --sandbox [--method M] [--path P] [--body FILE | --body-json JSON] [--header NAME=VALUE]... [--effects-url URL] [--concurrency N] [--require-key] [--as-a NAME=VALUE --as-b NAME=VALUE] [--ttl DUR --slow] [--max-requests N] [--rate N] [--timeout DUR] [--json]",
		"Black-box audit of an HTTP API's idempotency: it sends real requests to URL\n"+
			"(a sandbox: they create real effects there) and checks replay, divergence,\n"+
			"concurrency, missing and malformed keys, in-flight duplicates, scope\n"+
			"isolation, the problem format (RFC 9457) and, with --slow, retention.\n"+
			"Exit 0 when every check passes, 3 when one fails, 1 when the audit could not run.\n"+
			"--effects-url names a GET endpoint answering the number of effects made so far\n"+
			"(a plain integer, or a JSON object with a \"count\" member).",
		"idem audit http://localhost:8787 --sandbox --path /charges --body-json '{\"amount\":100}' --effects-url http://localhost:8080/test/charges/count")
	var o auditOpts
	f.BoolVar(&o.sandbox, "sandbox", false, "assert that URL is a test system where the audit's requests may create effects (required)")
	f.StringVar(&o.method, "method", http.MethodPost, "method of the mutating request")
	f.StringVar(&o.path, "path", "", "request path (and query), replacing URL's")
	f.StringVar(&o.bodyFile, "body", "", "file holding the request body (JSON object bodies get the reordering probe)")
	f.StringVar(&o.bodyJSON, "body-json", "", "the request body, inline (default {})")
	f.Var(&o.headers, "header", "extra request header NAME=VALUE (repeatable), e.g. credentials")
	f.StringVar(&o.effectsURL, "effects-url", "", "GET URL answering how many effects the API has made; enables the effect counts")
	f.IntVar(&o.concurrency, "concurrency", 16, "identical requests sent at once by the concurrency check")
	f.BoolVar(&o.requireKey, "require-key", false, "expect 400 for the mutating request without an Idempotency-Key")
	f.StringVar(&o.asA, "as-a", "", "header NAME=VALUE of principal A, for the scope isolation check")
	f.StringVar(&o.asB, "as-b", "", "header NAME=VALUE of principal B, for the scope isolation check")
	o.ttl = f.duration("ttl", 0, "the API's advertised retention; with --slow a replay is checked at the TTL minus a margin (a tenth of it, at most 1h)")
	f.BoolVar(&o.slow, "slow", false, "run the retention check, which waits most of --ttl")
	f.IntVar(&o.maxRequests, "max-requests", 500, "most requests the audit sends, effects-url reads included")
	f.Float64Var(&o.rate, "rate", 0, "most requests per second (0: no limit)")
	o.timeout = f.duration("timeout", 30*time.Second, "how long one request may take")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		if len(pos) == 0 {
			return f.usageError("missing URL")
		}
		return f.usageError("unexpected argument %q", pos[1])
	}
	a, err := o.auditor(pos[0])
	if err != nil {
		return f.usageError("%v", err)
	}
	rep, err := a.run(ctx)
	if err != nil {
		return f.fail(fmt.Errorf("could not run: %w", err))
	}
	if o.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(e.stdout)
	}
	if !rep.Passed {
		return exitFindings
	}
	return exitOK
}

// auditor runs the probes against one API.
type auditor struct {
	o           auditOpts
	target      string
	body        string
	header      http.Header
	a, b        [2]string // scope principals' header name and value
	client      *http.Client
	sent        atomic.Int64
	rate        *limiter
	run1        string
	mu          sync.Mutex
	errAns      []probeAnswer // error answers, for the problem format check
	concAnswers []*reply      // the concurrency check's answers
}

// probeAnswer is an error answer and the probe that got it.
type probeAnswer struct {
	probe string
	r     *reply
}

func (o auditOpts) auditor(rawURL string) (*auditor, error) {
	if !o.sandbox {
		return nil, errors.New("refusing to start without --sandbox: the audit sends requests that create real effects; pass --sandbox to assert URL is a test system")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", rawURL)
	}
	if o.path != "" {
		p, err := url.Parse(o.path)
		if err != nil || !strings.HasPrefix(p.Path, "/") {
			return nil, fmt.Errorf("--path %q is not an absolute path", o.path)
		}
		u.Path, u.RawPath, u.RawQuery = p.Path, p.RawPath, p.RawQuery
	}
	o.method = strings.ToUpper(o.method)
	switch {
	case !isToken(o.method):
		return nil, fmt.Errorf("--method %q is not an HTTP method", o.method)
	case o.method == http.MethodGet || o.method == http.MethodHead || o.method == http.MethodOptions:
		return nil, fmt.Errorf("--method %s is not a mutating method", o.method)
	}
	a := &auditor{o: o, target: u.String(), header: http.Header{}}
	switch {
	case o.bodyFile != "" && o.bodyJSON != "":
		return nil, errors.New("--body and --body-json are exclusive")
	case o.bodyFile != "":
		b, err := os.ReadFile(o.bodyFile)
		if err != nil {
			return nil, fmt.Errorf("--body: %w", err)
		}
		a.body = string(b)
	case o.bodyJSON != "":
		if !json.Valid([]byte(o.bodyJSON)) {
			return nil, errors.New("--body-json is not valid JSON")
		}
		a.body = o.bodyJSON
	default:
		a.body = "{}"
	}
	for _, h := range o.headers {
		name, value, err := parseHeader(h)
		if err != nil {
			return nil, fmt.Errorf("--header: %w", err)
		}
		a.header.Add(name, value)
	}
	if a.header.Get("Content-Type") == "" && json.Valid([]byte(a.body)) {
		a.header.Set("Content-Type", "application/json")
	}
	if (o.asA == "") != (o.asB == "") {
		return nil, errors.New("--as-a and --as-b go together")
	}
	if o.asA != "" {
		for _, p := range []struct {
			flag, v string
			dst     *[2]string
		}{{"--as-a", o.asA, &a.a}, {"--as-b", o.asB, &a.b}} {
			name, value, err := parseHeader(p.v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.flag, err)
			}
			*p.dst = [2]string{name, value}
		}
		if a.a == a.b {
			return nil, errors.New("--as-a and --as-b name the same principal")
		}
	}
	if o.effectsURL != "" {
		if e, err := url.Parse(o.effectsURL); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("--effects-url %q is not an http(s) URL", o.effectsURL)
		}
	}
	if o.concurrency < 2 {
		return nil, fmt.Errorf("--concurrency must be at least 2, got %d", o.concurrency)
	}
	if o.maxRequests < 1 {
		return nil, fmt.Errorf("--max-requests must be positive, got %d", o.maxRequests)
	}
	if o.rate < 0 {
		return nil, fmt.Errorf("--rate must not be negative, got %g", o.rate)
	}
	if *o.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	if o.slow && *o.ttl == 0 {
		return nil, errors.New("--slow needs --ttl")
	}
	a.client = &http.Client{
		Timeout:   *o.timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency, Proxy: http.ProxyFromEnvironment},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	a.rate = newLimiter(o.rate)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	a.run1 = hex.EncodeToString(b)
	return a, nil
}

// reply is one response, read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r *reply) ok() bool { return r.status >= 200 && r.status < 300 }
func (r *reply) replayed() bool {
	return strings.EqualFold(r.header.Get(idemhttp.ReplayedHeader), "true")
}

// sameAs reports whether r repeats first: the same status, and the same
// body or a replay mark.
func (r *reply) sameAs(first *reply) bool {
	return r.status == first.status && (r.body == first.body || r.replayed())
}

func (r *reply) String() string {
	s := fmt.Sprintf("%d %s", r.status, clipText(r.body))
	if r.replayed() {
		s += " (" + idemhttp.ReplayedHeader + ": true)"
	}
	return s
}

func clipText(s string) string {
	if len(s) > 120 {
		return strconv.Quote(s[:120]) + "…"
	}
	return strconv.Quote(s)
}

// errBudget: the request budget would be exceeded.
var errBudget = errors.New("request budget (--max-requests) reached")

// reserve checks that n more requests fit in the budget.
func (a *auditor) reserve(n int) error {
	if int(a.sent.Load())+n > a.o.maxRequests {
		return errBudget
	}
	return nil
}

func (a *auditor) take(ctx context.Context) error {
	if a.sent.Add(1) > int64(a.o.maxRequests) {
		a.sent.Add(-1)
		return errBudget
	}
	return a.rate.wait(ctx)
}

// keyNone sends no Idempotency-Key header.
const keyNone = "\x00none"

func (a *auditor) newKey(probe string) string { return "idem-audit-" + a.run1 + "-" + probe }

// send sends the mutating request with key (keyNone: no header) and body,
// with extra headers.
func (a *auditor) send(ctx context.Context, key, body string, extra ...[2]string) (*reply, error) {
	if err := a.take(ctx); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, a.o.method, a.target, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = a.header.Clone()
	for _, h := range extra {
		req.Header.Set(h[0], h[1])
	}
	if key != keyNone {
		req.Header.Set(idemhttp.HeaderName, key)
	}
	res, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &reply{status: res.StatusCode, header: res.Header, body: string(b)}, nil
}

// sendRaw writes the request on a connection of its own, so that a key
// net/http refuses to send (a control character) reaches the server.
func (a *auditor) sendRaw(ctx context.Context, key string) (*reply, error) {
	if err := a.take(ctx); err != nil {
		return nil, err
	}
	u, _ := url.Parse(a.target)
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	d := &net.Dialer{Timeout: *a.o.timeout}
	var conn net.Conn
	var err error
	if u.Scheme == "https" {
		conn, err = (&tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: u.Hostname()}}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(*a.o.timeout))
	req, err := http.NewRequest(a.o.method, a.target, strings.NewReader(a.body))
	if err != nil {
		return nil, err
	}
	req.Header = a.header.Clone()
	req.Header.Set(idemhttp.HeaderName, key)
	req.Close = true
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return &reply{status: res.StatusCode, header: res.Header, body: string(b)}, nil
}

// effects reads the effect count; ok is false without --effects-url.
func (a *auditor) effects(ctx context.Context) (n int, ok bool, err error) {
	if a.o.effectsURL == "" {
		return 0, false, nil
	}
	if err := a.take(ctx); err != nil {
		return 0, true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.o.effectsURL, nil)
	if err != nil {
		return 0, true, err
	}
	for k, v := range a.header {
		if k != "Content-Type" {
			req.Header[k] = v
		}
	}
	res, err := a.client.Do(req)
	if err != nil {
		return 0, true, fmt.Errorf("--effects-url: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	if res.StatusCode != http.StatusOK {
		return 0, true, fmt.Errorf("--effects-url answered %d", res.StatusCode)
	}
	s := strings.TrimSpace(string(b))
	if n, err := strconv.Atoi(s); err == nil {
		return n, true, nil
	}
	var obj struct {
		Count *int `json:"count"`
	}
	if json.Unmarshal(b, &obj) == nil && obj.Count != nil {
		return *obj.Count, true, nil
	}
	return 0, true, fmt.Errorf("--effects-url answered %s, not a count (an integer, or {\"count\": N})", clipText(s))
}

func (a *auditor) noteError(probe string, r *reply) {
	if r != nil && r.status >= 400 {
		a.mu.Lock()
		a.errAns = append(a.errAns, probeAnswer{probe, r})
		a.mu.Unlock()
	}
}

// Report is the audit's report card.
type Report struct {
	URL      string        `json:"url"`
	Method   string        `json:"method"`
	Checks   []CheckResult `json:"checks"`
	Requests int64         `json:"requests"`
	Passed   bool          `json:"passed"`
}

// CheckResult is one line of the report card.
type CheckResult struct {
	Name   string `json:"name"`
	Result string `json:"result"` // pass, fail or skip
	Detail string `json:"detail"`
}

func (r *Report) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "CHECK\tRESULT\tDETAIL\n")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Result, c.Detail)
	}
	_ = tw.Flush()
	verdict := "all checks passed"
	if !r.Passed {
		verdict = "some checks failed"
	}
	fmt.Fprintf(w, "\n%s %s: %s; %d requests sent\n", r.Method, r.URL, verdict, r.Requests)
}

// finding is a failed check's explanation.
type finding string

// skip is a check that did not run, and why.
type skip string

// probe is one check: it returns nil (pass, with detail), a finding, a
// skip, or an error that stops the audit.
type probe struct {
	name string
	run  func(ctx context.Context) (detail string, err error)
}

func (a *auditor) run(ctx context.Context) (*Report, error) {
	rep := &Report{URL: a.target, Method: a.o.method, Passed: true}
	probes := []probe{
		{"replay", a.replay},
		{"divergence", a.divergence},
		{"concurrency", a.concurrency},
		{"in-flight", a.inFlight},
		{"missing-key", a.missingKey},
		{"key-limits", a.keyLimits},
		{"scope", a.scope},
		{"problem-format", a.problemFormat},
		{"retention", a.retention},
	}
	for i, p := range probes {
		detail, err := p.run(ctx)
		res := CheckResult{Name: p.name, Result: "pass", Detail: detail}
		var f finding
		var s skip
		switch {
		case err == nil:
		case errors.As(err, &f):
			res.Result, res.Detail = "fail", string(f)
			rep.Passed = false
		case errors.As(err, &s):
			res.Result, res.Detail = "skip", string(s)
		case errors.Is(err, errBudget):
			res.Result, res.Detail = "skip", errBudget.Error()
		case i == 0 || ctx.Err() != nil:
			return nil, err
		default:
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		rep.Checks = append(rep.Checks, res)
	}
	rep.Requests = a.sent.Load()
	return rep, nil
}

func (f finding) Error() string { return string(f) }
func (s skip) Error() string    { return string(s) }

func fail(format string, args ...any) error { return finding(fmt.Sprintf(format, args...)) }

// errBaseline: the request itself does not succeed.
type errBaseline struct{ r *reply }

func (e errBaseline) Error() string {
	return fmt.Sprintf("the request got %s; the audit needs a --method, --path, --body and --header that succeed (2xx)", e.r)
}

// counted runs f and checks that it made want effects.
func (a *auditor) counted(ctx context.Context, want int, what string, f func() error) error {
	before, ok, err := a.effects(ctx)
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	if !ok {
		return nil
	}
	after, _, err := a.effects(ctx)
	if err != nil {
		return err
	}
	if after-before != want {
		return fail("%s made %d effects (--effects-url went %d → %d), want %d", what, after-before, before, after, want)
	}
	return nil
}

func (a *auditor) effectNote() string {
	if a.o.effectsURL == "" {
		return ""
	}
	return "; 1 effect"
}

func (a *auditor) replay(ctx context.Context) (string, error) {
	key := a.newKey("replay")
	var r1, r2 *reply
	err := a.counted(ctx, 1, "the same request sent twice with one key", func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		if !r1.ok() {
			return errBaseline{r1}
		}
		r2, err = a.send(ctx, key, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r2.sameAs(r1) {
		return "", fail("the same request sent twice with one key got %s, then %s: want the first answer repeated (same body, or %s: true)", r1, r2, idemhttp.ReplayedHeader)
	}
	return fmt.Sprintf("second answer repeats the first (%d%s)%s", r2.status, map[bool]string{true: ", " + idemhttp.ReplayedHeader + ": true"}[r2.replayed()], a.effectNote()), nil
}

func (a *auditor) divergence(ctx context.Context) (string, error) {
	if err := a.reserve(4 + 4*btoi(a.o.effectsURL != "")); err != nil {
		return "", err
	}
	key := a.newKey("divergence")
	changed := jsonmembers.Changed(a.body)
	var r1, r2 *reply
	err := a.counted(ctx, 1, "a request and another request with its key", func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		r2, err = a.send(ctx, key, changed)
		return err
	})
	if err != nil {
		return "", err
	}
	a.noteError("divergence", r2)
	switch {
	case r2.ok() && r2.sameAs(r1):
		return "", fail("the key reused with another body (%s) got the first request's answer %s: want 422, the recorded answer of one request was served for another (fingerprint the request body)", clipText(changed), r2)
	case r2.ok():
		return "", fail("the key reused with another body (%s) got %s: want 422 (the key must bind one request)", clipText(changed), r2)
	case r2.status >= 500:
		return "", fail("the key reused with another body got %s: want 422", r2)
	}
	detail := fmt.Sprintf("another body with the key is refused (%d)", r2.status)
	if r2.status != http.StatusUnprocessableEntity {
		detail += "; the draft's status is 422"
	}
	reordered, ok := jsonmembers.Reordered(a.body)
	if !ok {
		return detail, nil
	}
	key = a.newKey("reordered")
	var r3, r4 *reply
	err = a.counted(ctx, 1, "a JSON body and the same body reordered, with one key", func() (err error) {
		if r3, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		r4, err = a.send(ctx, key, reordered)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r4.sameAs(r3) {
		return "", fail("the same JSON body with its members reordered got %s after %s: want a replay (fingerprint the parsed document, not its bytes)", r4, r3)
	}
	return detail + "; the body reordered replays", nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a *auditor) concurrency(ctx context.Context) (string, error) {
	n := a.o.concurrency
	if err := a.reserve(n + 2); err != nil {
		return "", err
	}
	key := a.newKey("concurrency")
	answers := make([]*reply, n)
	errs := make([]error, n)
	err := a.counted(ctx, 1, fmt.Sprintf("%d identical requests sent at once", n), func() error {
		burst.Run(n, func(i int) { answers[i], errs[i] = a.send(ctx, key, a.body) })
		return errors.Join(errs...)
	})
	a.concAnswers = answers
	if err != nil {
		return "", err
	}
	var first *reply
	for _, r := range answers {
		if r.ok() && (first == nil || !r.replayed() && first.replayed()) {
			first = r
		}
	}
	if first == nil {
		return "", fail("%d identical requests sent at once: none succeeded (first: %s)", n, answers[0])
	}
	var ok, refused int
	for _, r := range answers {
		switch {
		case r.ok() && !r.sameAs(first):
			return "", fail("%d identical requests sent at once got different answers: %s and %s; want one effect and the same answer for all", n, first, r)
		case r.ok():
			ok++
		default:
			refused++
		}
	}
	return fmt.Sprintf("%d identical requests at once: %d identical answers, %d refused%s", n, ok, refused, a.effectNote()), nil
}

func (a *auditor) inFlight(context.Context) (string, error) {
	if a.concAnswers == nil {
		return "", skip("needs the concurrency check's answers")
	}
	var refused int
	for _, r := range a.concAnswers {
		switch {
		case r == nil || r.ok():
		case r.status == http.StatusConflict && r.header.Get("Retry-After") != "":
			refused++
			a.noteError("in-flight", r)
		case r.status == http.StatusConflict:
			a.noteError("in-flight", r)
			return "", fail("a duplicate in flight got %s without Retry-After: want 409 with Retry-After, or a wait then the replay", r)
		default:
			a.noteError("in-flight", r)
			return "", fail("a duplicate in flight got %s: want 409 with Retry-After, or a wait then the replay", r)
		}
	}
	if refused == 0 {
		return "duplicates waited and got the replay (or arrived after the first finished)", nil
	}
	return fmt.Sprintf("%d duplicates in flight refused with 409 and Retry-After", refused), nil
}

func (a *auditor) missingKey(ctx context.Context) (string, error) {
	if !a.o.requireKey {
		return "", skip("pass --require-key when the API must refuse the request without a key")
	}
	var r *reply
	err := a.counted(ctx, 0, "the request without a key", func() (err error) {
		r, err = a.send(ctx, keyNone, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	a.noteError("missing-key", r)
	if r.status != http.StatusBadRequest {
		return "", fail("the request without an %s got %s: want 400 (a retry of it could apply it twice)", idemhttp.HeaderName, r)
	}
	return "400 without a key", nil
}

func (a *auditor) keyLimits(ctx context.Context) (string, error) {
	if err := a.reserve(3 + 2*btoi(a.o.effectsURL != "")); err != nil {
		return "", err
	}
	cases := []struct{ what, key string }{
		{"an empty key", ""},
		{"a key of 256 characters", strings.Repeat("k", 256)},
		{"a key with a control character", "idem-audit\x01" + a.run1},
	}
	var bad []string
	err := a.counted(ctx, 0, "requests with malformed keys", func() error {
		for _, c := range cases {
			var r *reply
			var err error
			if strings.ContainsFunc(c.key, func(r rune) bool { return r < 0x20 }) {
				r, err = a.sendRaw(ctx, c.key)
			} else {
				r, err = a.send(ctx, c.key, a.body)
				a.noteError("key-limits", r)
			}
			if err != nil {
				return err
			}
			if r.status != http.StatusBadRequest {
				bad = append(bad, fmt.Sprintf("%s got %s", c.what, r))
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(bad) > 0 {
		return "", fail("%s: want 400 (keys are 1 to 255 printable ASCII characters; a key cut or cleaned into acceptance can collide with another)", strings.Join(bad, "; "))
	}
	return "400 for an empty key, 256 characters and a control character", nil
}

func (a *auditor) scope(ctx context.Context) (string, error) {
	if a.o.asA == "" {
		return "", skip("pass --as-a and --as-b (two principals' credentials) to check scope isolation")
	}
	key := a.newKey("scope")
	var rA, rB *reply
	err := a.counted(ctx, 1, "principal A's request", func() (err error) {
		rA, err = a.send(ctx, key, a.body, a.a)
		return err
	})
	if err != nil {
		return "", err
	}
	if !rA.ok() {
		return "", fail("principal A's request got %s: want success (check --as-a)", rA)
	}
	err = a.counted(ctx, 1, "principal B's request with A's key", func() (err error) {
		rB, err = a.send(ctx, key, a.body, a.b)
		return err
	})
	var f finding
	switch {
	case errors.As(err, &f):
		return "", fail("principal B sent the key A had used: %s; B must get its own answer, never A's recorded one (scope keys by the authenticated principal)", f)
	case err != nil:
		return "", err
	case rB.replayed() || rB.ok() && rB.body == rA.body && a.o.effectsURL == "":
		return "", fail("principal B sent the key A had used and got A's recorded answer %s: scope keys by the authenticated principal", rB)
	case rB.status == http.StatusUnprocessableEntity || rB.status == http.StatusConflict:
		a.noteError("scope", rB)
		return "", fail("principal B sent the key A had used and got %s: B's key was compared with A's record, so keys are not scoped by principal", rB)
	case !rB.ok():
		return "", fail("principal B's request got %s: want success (check --as-b)", rB)
	}
	return "B's request with A's key ran on its own", nil
}

func (a *auditor) problemFormat(context.Context) (string, error) {
	a.mu.Lock()
	answers := a.errAns
	a.mu.Unlock()
	if len(answers) == 0 {
		return "", skip("no error answers to look at")
	}
	var bad []string
	for _, p := range answers {
		if why := problemDefect(p.r); why != "" {
			bad = append(bad, fmt.Sprintf("%d from %s: %s", p.r.status, p.probe, why))
		}
	}
	if len(bad) > 0 {
		return "", fail("%s (RFC 9457: Content-Type application/problem+json, a JSON object with type, title, status)", strings.Join(bad, "; "))
	}
	return fmt.Sprintf("%d error answers are application/problem+json", len(answers)), nil
}

// problemDefect says what keeps r from being an RFC 9457 problem, or "".
func problemDefect(r *reply) string {
	mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil || mt != idemhttp.ProblemContentType {
		return fmt.Sprintf("Content-Type %q, not %s", r.header.Get("Content-Type"), idemhttp.ProblemContentType)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		return "the body is not a JSON object"
	}
	if t, ok := doc["type"]; ok {
		if _, isStr := t.(string); !isStr {
			return "\"type\" is not a string"
		}
	}
	if s, ok := doc["status"]; ok {
		if n, isNum := s.(float64); !isNum || int(n) != r.status {
			return fmt.Sprintf("\"status\" %v differs from the HTTP status", s)
		}
	}
	return ""
}

func (a *auditor) retention(ctx context.Context) (string, error) {
	ttl := *a.o.ttl
	switch {
	case ttl == 0:
		return "", skip("pass --ttl DUR (the advertised retention) and --slow")
	case !a.o.slow:
		return "", skip(fmt.Sprintf("waits %v: pass --slow", ttl-retentionMargin(ttl)))
	}
	key := a.newKey("retention")
	wait := ttl - retentionMargin(ttl)
	var r1, r2 *reply
	err := a.counted(ctx, 1, fmt.Sprintf("the same request sent twice, %v apart", wait), func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		r2, err = a.send(ctx, key, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r2.sameAs(r1) {
		return "", fail("the same request %v after the first (advertised TTL %v) got %s after %s: want the replay", wait, ttl, r2, r1)
	}
	return fmt.Sprintf("replays %v after the first request (TTL %v)", wait, ttl), nil
}

// retentionMargin is how long before the TTL the retention check replays.
func retentionMargin(ttl time.Duration) time.Duration {
	return min(ttl/10, time.Hour)
}

// limiter spaces requests to at most rate a second (0: no limit).
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return &limiter{}
	}
	return &limiter{interval: time.Duration(float64(time.Second) / rate)}
}

func (l *limiter) wait(ctx context.Context) error {
	if l.interval == 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	select {
	case <-time.After(time.Until(at)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
