package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/audit"
)

// cmdAudit audits an HTTP API's idempotency with real requests to a
// sandbox: `idem audit URL --sandbox …`. Exit 0 when every check passes, 3
// when one fails, 1 when the audit could not run. The auditor is
// cmd/idem/internal/audit.
func cmdAudit(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("audit",
		"idem audit URL --sandbox [--method M] [--path P] [--body FILE | --body-json JSON] [--header NAME=VALUE]... [--effects-url URL [--effects-metric NAME] | --fixture ADDR] [--concurrency N] [--require-key] [--as-a NAME=VALUE --as-b NAME=VALUE] [--ttl DUR --slow] [--max-requests N] [--rate N] [--timeout DUR] [--json]",
		"Black-box audit of an HTTP API's idempotency: it sends real requests to URL\n"+
			"(a sandbox: they create real effects there) and checks replay, divergence,\n"+
			"concurrency, missing and malformed keys, in-flight duplicates, scope\n"+
			"isolation, the problem format (RFC 9457) and, with --slow, retention.\n"+
			"Every check compares the answers (the same status and body for duplicates of\n"+
			"one intent) and, with a count of the API's effects, the effects: one per intent.\n"+
			"--effects-url names a GET endpoint answering the number of effects made so far\n"+
			"(a plain integer, a JSON object with a \"count\" member, or with --effects-metric\n"+
			"a Prometheus counter); --fixture ADDR serves the auditor's own counting upstream\n"+
			"on ADDR, for an idempotency layer (a proxy, a gateway) whose upstream it can be.\n"+
			"Without a count, a check that rests on a repeated answer is inconclusive: an\n"+
			"API that runs the effect again and answers alike would look the same.\n"+
			"Exit 0 when no check fails (inconclusive ones included), 3 when one fails,\n"+
			"1 when the audit could not run.",
		"idem audit http://localhost:8787 --sandbox --path /charges --body-json '{\"amount\":100}' --effects-url http://localhost:8080/test/charges/count")
	var o audit.Options
	f.BoolVar(&o.Sandbox, "sandbox", false, "assert that URL is a test system where the audit's requests may create effects (required)")
	f.StringVar(&o.Method, "method", http.MethodPost, "method of the mutating request")
	f.StringVar(&o.Path, "path", "", "request path (and query), replacing URL's")
	f.StringVar(&o.BodyFile, "body", "", "file holding the request body (JSON object bodies get the reordering probe)")
	f.StringVar(&o.BodyJSON, "body-json", "", "the request body, inline (default {})")
	f.Var((*listFlag)(&o.Headers), "header", "extra request header `NAME=VALUE` (repeatable), e.g. credentials")
	f.StringVar(&o.EffectsURL, "effects-url", "", "GET URL answering how many effects the API has made; enables the effect counts")
	f.StringVar(&o.EffectsMetric, "effects-metric", "", "the counter to read in --effects-url's Prometheus text answer: NAME or NAME{label=\"value\",…} (matching samples summed)")
	fixture := f.String("fixture", "", "serve the auditor's own upstream on `ADDR` (host:port) for the audit's duration and count its effects; point the audited proxy or gateway's upstream at it")
	f.IntVar(&o.Concurrency, "concurrency", 16, "identical requests sent at once by the concurrency check")
	f.BoolVar(&o.RequireKey, "require-key", false, "expect 400 for the mutating request without an Idempotency-Key")
	f.StringVar(&o.AsA, "as-a", "", "header NAME=VALUE of principal A, for the scope isolation check")
	f.StringVar(&o.AsB, "as-b", "", "header NAME=VALUE of principal B, for the scope isolation check")
	ttl := f.duration("ttl", 0, "the API's advertised retention; with --slow a replay is checked at the TTL minus a margin (a tenth of it, at most 1h)")
	f.BoolVar(&o.Slow, "slow", false, "run the retention check, which waits most of --ttl")
	f.IntVar(&o.MaxRequests, "max-requests", 500, "most requests the audit sends, effects-url reads included")
	f.Float64Var(&o.Rate, "rate", 0, "most requests per second (0: no limit)")
	timeout := f.duration("timeout", 30*time.Second, "how long one request may take")
	asJSON := f.Bool("json", false, "print the report as JSON (the report card: url, method, checks with name, result and detail, requests, passed; see docs/cli.md)")
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
	o.TTL, o.Timeout = *ttl, *timeout
	if *fixture != "" {
		if o.EffectsURL != "" {
			return f.usageError("--effects-url and --fixture are exclusive: one count source")
		}
		ln, err := net.Listen("tcp", *fixture)
		if err != nil {
			return f.fail(fmt.Errorf("--fixture: %w", err))
		}
		fx := &audit.Fixture{}
		srv := &http.Server{Handler: fx, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		o.Counter = fx
		fmt.Fprintf(e.stderr, "idem audit: the fixture upstream listens on http://%s\n", ln.Addr())
	}
	a, err := audit.New(pos[0], o)
	if err != nil {
		return f.usageError("%v", err)
	}
	rep, err := a.Run(ctx)
	if err != nil {
		return f.fail(fmt.Errorf("could not run: %w", err))
	}
	if *asJSON {
		if code := writeJSON(f, e.stdout, rep); code != exitOK {
			return code
		}
	} else {
		rep.WriteText(e.stdout)
	}
	if !rep.Passed {
		return exitFindings
	}
	return exitOK
}
