// Package audit is idem audit's auditor: a black-box audit of an HTTP API's
// idempotency with real requests to a sandbox — replay, divergence,
// concurrency, in-flight duplicates, missing and malformed keys, scope
// isolation, the problem format (RFC 9457) and retention — each check
// counting the API's effects when it can. cmd/idem's audit command parses
// the flags into [Options] and prints the [Report].
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
)

// Options are what idem audit's flags say; each field is the flag of the
// same name.
type Options struct {
	// Sandbox asserts that the URL is a test system where the audit's
	// requests may create effects. Required.
	Sandbox bool
	// Method of the mutating request: not GET, HEAD or OPTIONS. Required
	// (idem audit's --method defaults to POST).
	Method string
	// Path (and query) replacing the URL's. Defaults to the URL's.
	Path string
	// BodyFile names a file holding the request body; BodyJSON is the
	// body inline. Exclusive. Defaults to {}.
	BodyFile, BodyJSON string
	// Headers are extra request headers, NAME=VALUE or "NAME: VALUE".
	Headers []string
	// EffectsURL is a GET endpoint answering the number of effects made
	// so far (an integer, a JSON object with a "count" member, or with
	// EffectsMetric the Prometheus text format); it enables the effect
	// counts. Defaults to none.
	EffectsURL string
	// EffectsMetric names the counter to read in EffectsURL's Prometheus
	// text answer: NAME, or NAME{label="value",…}; the matching samples
	// are summed. Needs EffectsURL.
	EffectsMetric string
	// Counter counts effects in process (the auditor's own [Fixture]);
	// exclusive with EffectsURL. idem audit --fixture sets it.
	Counter Counter
	// Concurrency is how many identical requests the concurrency check
	// sends at once; at least 2 (idem audit's default is 16).
	Concurrency int
	// RequireKey expects 400 for the request without a key.
	RequireKey bool
	// AsA and AsB are the headers (NAME=VALUE) of two principals, for
	// the scope isolation check. Together or not at all.
	AsA, AsB string
	// TTL is the API's advertised retention; with Slow a replay is
	// checked at the TTL minus a margin (a tenth of it, at most 1h).
	TTL  time.Duration
	Slow bool
	// MaxRequests bounds the requests the audit sends, effect counts
	// included; positive (idem audit's default is 500).
	MaxRequests int
	// Rate bounds the requests a second; 0 is no limit.
	Rate float64
	// Timeout bounds one request; positive (idem audit's default is
	// 30s).
	Timeout time.Duration
}

// parseHeader splits NAME=VALUE or "NAME: VALUE".
func parseHeader(s string) (name, value string, err error) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 || !httpsyntax.IsToken(s[:i]) {
		return "", "", fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	return s[:i], strings.TrimSpace(s[i+1:]), nil
}

// Auditor runs the checks against one API; New makes one.
type Auditor struct {
	o         Options
	target    string
	body      string
	header    http.Header
	a, b      [2]string // scope principals' header name and value
	client    *http.Client
	sent      atomic.Int64
	rate      *limiter
	run1      string
	mu        sync.Mutex
	errAns    []probeAnswer // error answers, for the problem format check
	conc      *burstResult  // the concurrency check's burst, for in-flight
	tally     *EffectCount  // the running check's effect count; nil: not counted
	uncounted bool          // the running check sent requests without a count
}

// burstResult is the concurrency check's identical requests at once: their
// answers and the effects they made (nil: not counted).
type burstResult struct {
	answers []*reply
	effects *EffectCount
}

// probeAnswer is an error answer and the probe that got it.
type probeAnswer struct {
	probe string
	r     *reply
}

// New prepares an audit of the API at rawURL with o. Its errors are the
// command line's mistakes, named by their flags.
func New(rawURL string, o Options) (*Auditor, error) {
	if !o.Sandbox {
		return nil, errors.New("refusing to start without --sandbox: the audit sends requests that create real effects; pass --sandbox to assert URL is a test system")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", rawURL)
	}
	if o.Path != "" {
		p, err := url.Parse(o.Path)
		if err != nil || !strings.HasPrefix(p.Path, "/") {
			return nil, fmt.Errorf("--path %q is not an absolute path", o.Path)
		}
		u.Path, u.RawPath, u.RawQuery = p.Path, p.RawPath, p.RawQuery
	}
	o.Method = strings.ToUpper(o.Method)
	switch {
	case !httpsyntax.IsToken(o.Method):
		return nil, fmt.Errorf("--method %q is not an HTTP method", o.Method)
	case o.Method == http.MethodGet || o.Method == http.MethodHead || o.Method == http.MethodOptions:
		return nil, fmt.Errorf("--method %s is not a mutating method", o.Method)
	}
	a := &Auditor{o: o, target: u.String(), header: http.Header{}}
	switch {
	case o.BodyFile != "" && o.BodyJSON != "":
		return nil, errors.New("--body and --body-json are exclusive")
	case o.BodyFile != "":
		b, err := os.ReadFile(o.BodyFile)
		if err != nil {
			return nil, fmt.Errorf("--body: %w", err)
		}
		a.body = string(b)
	case o.BodyJSON != "":
		if !json.Valid([]byte(o.BodyJSON)) {
			return nil, errors.New("--body-json is not valid JSON")
		}
		a.body = o.BodyJSON
	default:
		a.body = "{}"
	}
	for _, h := range o.Headers {
		name, value, err := parseHeader(h)
		if err != nil {
			return nil, fmt.Errorf("--header: %w", err)
		}
		a.header.Add(name, value)
	}
	if a.header.Get("Content-Type") == "" && json.Valid([]byte(a.body)) {
		a.header.Set("Content-Type", "application/json")
	}
	if (o.AsA == "") != (o.AsB == "") {
		return nil, errors.New("--as-a and --as-b go together")
	}
	if o.AsA != "" {
		for _, p := range []struct {
			flag, v string
			dst     *[2]string
		}{{"--as-a", o.AsA, &a.a}, {"--as-b", o.AsB, &a.b}} {
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
	switch {
	case o.EffectsMetric != "" && o.EffectsURL == "":
		return nil, errors.New("--effects-metric needs --effects-url")
	case o.EffectsURL != "" && o.Counter != nil:
		return nil, errors.New("--effects-url and --fixture are exclusive: one count source")
	}
	if o.EffectsMetric != "" {
		if _, _, err := parseSeries(o.EffectsMetric); err != nil {
			return nil, fmt.Errorf("--effects-metric %q: %w", o.EffectsMetric, err)
		}
	}
	if o.EffectsURL != "" {
		if e, err := url.Parse(o.EffectsURL); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("--effects-url %q is not an http(s) URL", o.EffectsURL)
		}
	}
	if o.Concurrency < 2 {
		return nil, fmt.Errorf("--concurrency must be at least 2, got %d", o.Concurrency)
	}
	if o.MaxRequests < 1 {
		return nil, fmt.Errorf("--max-requests must be positive, got %d", o.MaxRequests)
	}
	if o.Rate < 0 {
		return nil, fmt.Errorf("--rate must not be negative, got %g", o.Rate)
	}
	if o.Timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	if o.Slow && o.TTL == 0 {
		return nil, errors.New("--slow needs --ttl")
	}
	a.client = &http.Client{
		Timeout:   o.Timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency, Proxy: http.ProxyFromEnvironment},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	a.rate = newLimiter(o.Rate)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	a.run1 = hex.EncodeToString(b)
	return a, nil
}

// probe is one check: it returns nil (pass, with detail), a finding, a
// skip, an inconclusive, or an error that stops the audit.
type probe struct {
	name string
	run  func(ctx context.Context) (detail string, err error)
}

// Run sends the audit's requests and returns its report card. An error
// means the audit could not run (the first request failed to get an
// answer, or the request itself does not succeed): nothing was judged.
func (a *Auditor) Run(ctx context.Context) (*Report, error) {
	rep := &Report{URL: a.target, Method: a.o.Method, Passed: true, EffectsSource: a.effectsSource()}
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
		a.tally, a.uncounted = nil, false
		detail, err := p.run(ctx)
		res := CheckResult{Name: p.name, Result: "pass", Detail: detail, Effects: a.tally}
		var f finding
		var s skip
		var inc inconclusive
		switch {
		case err == nil:
		case errors.As(err, &f):
			res.Result, res.Detail = "fail", string(f)
			rep.Passed = false
		case errors.As(err, &inc):
			res.Result, res.Detail = "inconclusive", string(inc)
			rep.Inconclusive++
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
