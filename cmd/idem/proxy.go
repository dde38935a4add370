package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemprom"
)

// DefaultListen is the proxy's default listen address: loopback only, so a
// proxy started for a try is not exposed to the network.
const DefaultListen = "127.0.0.1:8787"

// DefaultUpstreamTimeout bounds, by default, a protected request's whole
// upstream exchange (sending it, the response headers and the body).
const DefaultUpstreamTimeout = 60 * time.Second

// DefaultReleaseStatus is the upstream status that, by default, means "not
// applied". Only 429: a 503 may come from a gateway in front of the API
// after the API applied the request, and releasing its key would let a
// retry apply it again.
const DefaultReleaseStatus = "429"

type proxyOpts struct {
	listen, upstream, store, admin, scopeHeader, inFlight string
	spool, keyFile, quotaRate, compat                     string
	quotaInFlight                                         int
	methods, releaseStatus                                string
	requireKey, migrate                                   bool
	allowVolatile                                         bool
	allowAsync                                            bool
	bodyTimeout                                           *time.Duration
	wait, lease, ttl, shutdown, upstreamTimeout           *time.Duration
	writeTimeout                                          *time.Duration
	finishTimeout                                         *time.Duration
	replayCache                                           *time.Duration
	cover                                                 coverFlag
	maxBody, maxResponse                                  int64
	forwardKey                                            bool
	recordHeaders                                         stringsFlag
	intent                                                intentFlag
	// The scope mode (see scope.go) and the digest secret.
	scopeJWT, globalScope                     bool
	jwks, scopeClaim, jwtAudience, secretFile string
	// set holds the names of the flags given on the command line.
	set map[string]bool
}

func cmdProxy(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("proxy",
		"idem proxy --upstream URL (--global-scope | --scope-header NAME | --scope-jwt --jwks FILE|URL [--scope-claim CLAIM[,CLAIM]] [--jwt-audience AUD]) [--digest-secret-file FILE] [--listen ADDR] [--store DSN] [--admin ADDR] [--require-key] [--compat ietf|stripe] [--in-flight wait|reject] [--wait DUR] [--lease DUR] [--ttl DUR] [--cover NAME=DUR]... [--max-body BYTES] [--max-response BYTES] [--release-status LIST] [--methods LIST] [--forward-key=false] [--record-header NAME]... [--intent FIELD=POINTER]... [--upstream-timeout DUR] [--write-timeout DUR] [--finish-timeout DUR] [--replay-cache DUR] [--spool DIR] [--encryption-key-file FILE] [--scope-quota-inflight N] [--scope-quota-rate N/min] [--migrate=false] [--allow-volatile-store] [--allow-async-replication] [--body-timeout DUR] [--shutdown-timeout DUR]",
		"Reverse proxy that makes an HTTP API's mutating requests idempotent with the\n"+
			"Idempotency-Key header. GET, HEAD and OPTIONS pass through untouched.\n"+
			"Responses are recorded and replayed with Idempotent-Replayed: true; see docs/http.md.\n"+
			"Keys are scoped by principal: name one scope mode (docs/security.md, Principals and scopes).",
		"idem proxy --upstream http://localhost:8080 --listen 127.0.0.1:8787 --scope-header X-User-Id")
	o := proxyOpts{cover: coverFlag{}}
	f.StringVar(&o.listen, "listen", DefaultListen, "address to listen on")
	f.StringVar(&o.upstream, "upstream", "", "upstream base URL (required)")
	f.StringVar(&o.store, "store", storeopen.Default, "store DSN: "+storeDSNs+" (see docs/http.md)")
	f.StringVar(&o.admin, "admin", "", "address for /metrics and /healthz (off when empty)")
	f.BoolVar(&o.requireKey, "require-key", false, "refuse mutating requests without an Idempotency-Key (400)")
	f.BoolVar(&o.forwardKey, "forward-key", true, "send a protected request's Idempotency-Key on to the upstream, so it (and its provider) see the intent's key; never resent on a dropped connection")
	f.Var(&o.recordHeaders, "record-header", "a response `NAME` to record and replay besides the defaults (repeatable; Request-Id and X-Request-Id are recorded already)")
	f.Var(&o.intent, "intent", "an intent field read from the request body, `FIELD=POINTER`: a JSON Pointer (/amount) or a form field name; amount, currency, operation, counterparty, or any other name (repeatable)")
	f.StringVar(&o.scopeHeader, "scope-header", "", "scope keys by the principal a trusted gateway names in this request header (e.g. X-User-Id): the value, trimmed, compared as-is and stored in clear; requests without it get 401. The gateway must remove any copy the client sent")
	f.BoolVar(&o.scopeJWT, "scope-jwt", false, "scope keys by a claim of the request's bearer token, verified against --jwks (signature, exp, nbf, --jwt-audience); a bad, expired or missing token gets 401")
	f.StringVar(&o.jwks, "jwks", "", "with --scope-jwt: the JSON Web Key Set, a `FILE` (read at start) or an https URL (fetched at start, refreshed hourly and on an unknown key id)")
	f.StringVar(&o.scopeClaim, "scope-claim", "sub", "with --scope-jwt: the token `CLAIM` whose value is the scope; several, comma-separated (iss,sub), for tokens from several issuers")
	f.StringVar(&o.jwtAudience, "jwt-audience", "", "with --scope-jwt: refuse tokens whose aud does not name `AUD`")
	f.BoolVar(&o.globalScope, "global-scope", false, "every caller shares one key namespace: any caller can replay another's response by reusing its key (for a single trusted client); a 422 then names no differing fields")
	f.StringVar(&o.secretFile, "digest-secret-file", "", "a `FILE` holding the secret (16 bytes or more) that keys the per-scope field digests a 422 compares; give replicas sharing a store the same one. Default: a random secret per process")
	f.StringVar(&o.compat, "compat", "ietf", "the answers' profile: ietf (RFC 9457 problems, 422 for a reused key) or stripe (Stripe's answers for stripe-go and stripe-node: 400 idempotency_error for a reused key, Request-Id on every answer, Idempotency-Key and Stripe-Version replayed, --release-status "+statusList(idemhttp.StripeReleaseStatuses)+" by default); see docs/http.md")
	f.StringVar(&o.inFlight, "in-flight", "wait", "what a duplicate does while the first request runs: wait (then replay its outcome, or 409 past --wait) or reject (409 at once)")
	o.wait = f.duration("wait", 0, "how long a duplicate waits with --in-flight wait before 409 (default: --upstream-timeout plus the 5s its outcome has to be recorded, the first request's whole bound; "+DefaultUpstreamTimeout.String()+" with --upstream-timeout 0)")
	o.lease = f.duration("lease", 30*time.Second, "how long a request may run without a heartbeat before it is unknown")
	o.ttl = f.duration("ttl", 24*time.Hour, "how long recorded responses replay (e.g. 24h, 30d)")
	f.Var(o.cover, "cover", "a window the TTL must cover, NAME=DUR (repeatable); the proxy refuses to start if --ttl is shorter")
	f.Int64Var(&o.maxBody, "max-body", idemhttp.DefaultMaxBody, "largest request body in bytes (413 above)")
	f.Int64Var(&o.maxResponse, "max-response", idemhttp.DefaultMaxResponse, "largest response body recorded in bytes (larger ones replay as response-too-large)")
	f.StringVar(&o.releaseStatus, "release-status", DefaultReleaseStatus, "upstream statuses (4xx or 5xx) that mean \"not applied\": the key is released, not recorded (add 503 only if nothing in front of the API answers 503 after applying a request)")
	f.StringVar(&o.methods, "methods", "POST,PATCH", "methods made idempotent, comma-separated (GET, HEAD and OPTIONS always pass through)")
	o.finishTimeout = f.duration("finish-timeout", 10*time.Second, "how long a response's outcome write is retried (with backoff) while the store does not answer; past it the outcome goes to --spool")
	o.replayCache = f.duration("replay-cache", time.Second, "how long a recorded response is replayed from this process's memory before the store is read again: how long a correction made elsewhere (idem resolve --force) can go unseen here (0: off, every replay reads the store)")
	f.StringVar(&o.spool, "spool", DefaultSpool, "directory keeping outcomes the store could not take (fsync'd; applied when it answers, also after a restart); empty: none, such outcomes become unknown")
	f.StringVar(&o.keyFile, "encryption-key-file", "", keyFileUsage)
	f.IntVar(&o.quotaInFlight, "scope-quota-inflight", 0, "at most `N` requests of one scope running at once in this process (0: no limit); more get 429 scope-quota, not run")
	f.StringVar(&o.quotaRate, "scope-quota-rate", "", "at most `N/min` new keys per scope (also N/s, N/h), per process, as a token bucket with a burst of N; more get 429 scope-quota, not run; replays are never refused")
	f.BoolVar(&o.migrate, "migrate", true, "apply the store's schema migrations at start-up")
	f.BoolVar(&o.allowVolatile, "allow-volatile-store", false, "start on a store that can forget recorded responses (Redis evicting or without persistence, fsync off; see idem doctor): a retry after a lost record runs again")
	f.BoolVar(&o.allowAsync, "allow-async-replication", false, "start on a store whose replication can lose a claim it acknowledged in a failover (an asynchronous PostgreSQL standby, Redis replicas claims do not wait for; see idem doctor and docs/replication.md): the retries after such a failover run their effects again")
	o.bodyTimeout = f.duration("body-timeout", DefaultBodyTimeout, "how long a request body may take to arrive in full (0: no limit); past it, 408 before anything is claimed")
	o.shutdown = f.duration("shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	o.upstreamTimeout = f.duration("upstream-timeout", DefaultUpstreamTimeout, "how long a protected request's upstream exchange may take, response body included (0: no limit); past it, once sent, the outcome is unknown (504, then 409 on retries)")
	o.writeTimeout = f.duration("write-timeout", idemhttp.DefaultWriteTimeout, "how long a client may take to accept each 64 KiB of a protected response (0: no limit); the outcome is recorded before, whatever the client does")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	o.set = map[string]bool{}
	f.Visit(func(fl *flag.Flag) { o.set[fl.Name] = true })
	p, err := o.plan()
	if err != nil {
		return f.usageError("%v", err)
	}
	if err := idem.ValidateRetention(*o.ttl, o.cover); err != nil {
		fmt.Fprintf(e.stderr, "idem proxy: refusing to start: %v\n", err)
		return exitUsage
	}
	if err := runProxy(ctx, e, o, p); err != nil {
		if verr := (*idem.VolatileStoreError)(nil); errors.As(err, &verr) {
			fmt.Fprintln(e.stderr, "idem proxy: refusing to start: the store can forget recorded responses, and a retry after a lost record would run again:")
			for _, fd := range verr.Findings {
				fmt.Fprintf(e.stderr, "  %s = %s: %s\n    fix: %s\n", fd.Setting, fd.Value, fd.Problem, fd.Fix)
			}
			fmt.Fprintln(e.stderr, "Run idem doctor --store DSN for every finding; --allow-volatile-store starts anyway.")
			return exitUsage
		}
		if serr := (*idem.SpoolInUseError)(nil); errors.As(err, &serr) {
			fmt.Fprintf(e.stderr, "idem proxy: refusing to start: the spool directory %s belongs to store %s, and this proxy runs on %s: "+
				"its outcomes would be applied to the wrong store. Give each store its own --spool directory.\n", serr.Dir, serr.Owner, serr.Store)
			return exitUsage
		}
		if rerr := (*idem.ReplicationError)(nil); errors.As(err, &rerr) {
			fmt.Fprintf(e.stderr, "idem proxy: refusing to start: asynchronous replication (%s): a failover can lose a claim the store acknowledged, and the retries that follow would run the effect again:\n", rerr.Topology)
			for _, fd := range rerr.Findings {
				fmt.Fprintf(e.stderr, "  %s = %s: %s\n    fix: %s\n", fd.Setting, fd.Value, fd.Problem, fd.Fix)
			}
			fmt.Fprintln(e.stderr, "See docs/replication.md; idem doctor --store DSN shows every finding; --allow-async-replication starts anyway.")
			return exitUsage
		}
		return f.fail(err)
	}
	return exitOK
}

// plan is the validated form of the flags.
type plan struct {
	upstream *url.URL
	methods  []string
	release  []int
	inFlight idem.InFlightPolicy
	// upstreamTimeout bounds a protected request's upstream exchange,
	// response body included, and the wait for any request's response
	// headers; 0 is no limit.
	upstreamTimeout time.Duration
	// writeTimeout is idemhttp.Config.WriteTimeout: negative is no limit.
	writeTimeout time.Duration
	// maxResponse is --max-response.
	maxResponse int64
	// forwardKey is --forward-key.
	forwardKey bool
	// scope is the scope mode; scopeFn, built from it by runProxy, the
	// middleware's ScopeFunc.
	scope   *scopePlan
	scopeFn idemhttp.ScopeFunc
	// digestSecret is read from --digest-secret-file by runProxy.
	digestSecret []byte
	// keys is --encryption-key-file's keyring; nil: no encryption.
	keys *idem.Keyring
	// quota is --scope-quota-inflight and --scope-quota-rate.
	quota idemhttp.ScopeQuota
	// compat is --compat.
	compat idemhttp.Compat
	// wait bounds an in-flight duplicate's wait: --wait, or by default
	// the first request's own bound.
	wait time.Duration
}

func (o *proxyOpts) plan() (*plan, error) {
	var p plan
	if o.upstream == "" {
		return nil, errors.New("--upstream is required")
	}
	u, err := url.Parse(o.upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream %q is not an http(s) URL", o.upstream)
	}
	p.upstream = u
	for _, m := range strings.Split(o.methods, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch m {
		case "":
			continue
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return nil, fmt.Errorf("--methods: %s always passes through untouched", m)
		}
		if !isToken(m) {
			return nil, fmt.Errorf("--methods: %q is not an HTTP method", m)
		}
		p.methods = append(p.methods, m)
	}
	if len(p.methods) == 0 {
		return nil, errors.New("--methods is empty")
	}
	if p.compat, err = idemhttp.ParseCompat(o.compat); err != nil {
		return nil, fmt.Errorf("--compat must be ietf or stripe, got %q", o.compat)
	}
	release := o.releaseStatus
	if p.compat == idemhttp.CompatStripe && !o.set["release-status"] {
		release = statusList(idemhttp.StripeReleaseStatuses)
	}
	if p.release, err = parseStatusList(release); err != nil {
		return nil, fmt.Errorf("--release-status: %w", err)
	}
	if p.release == nil {
		p.release = []int{} // none: not the profile's default
	}
	for _, s := range p.release {
		if s < 400 {
			return nil, fmt.Errorf("--release-status: %d means the upstream applied the request; releasing its key would let a retry apply it again (only 4xx and 5xx statuses can mean \"not applied\")", s)
		}
	}
	if p.scope, err = o.planScope(); err != nil {
		return nil, err
	}
	switch o.inFlight {
	case "reject":
		p.inFlight = idem.InFlightReject
	case "wait":
		p.inFlight = idem.InFlightWait
	default:
		return nil, fmt.Errorf("--in-flight must be reject or wait, got %q", o.inFlight)
	}
	if o.maxBody <= 0 || o.maxResponse <= 0 {
		return nil, errors.New("--max-body and --max-response must be positive")
	}
	if _, err := storeopen.Parse(o.store); err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	if *o.replayCache < 0 {
		return nil, errors.New("--replay-cache must be 0 (off) or a positive duration")
	}
	if *o.lease <= 0 || *o.ttl <= 0 || *o.finishTimeout <= 0 {
		return nil, errors.New("--lease, --ttl and --finish-timeout must be positive")
	}
	if *o.upstreamTimeout < 0 || *o.writeTimeout < 0 {
		return nil, errors.New("--upstream-timeout and --write-timeout must not be negative (0: no limit)")
	}
	p.upstreamTimeout = *o.upstreamTimeout
	switch p.wait = *o.wait; {
	case p.wait < 0:
		return nil, errors.New("--wait must not be negative")
	case p.wait == 0 && p.upstreamTimeout > 0:
		p.wait = effectTimeout(p.upstreamTimeout)
	case p.wait == 0:
		p.wait = DefaultUpstreamTimeout
	}
	p.writeTimeout = *o.writeTimeout
	if p.writeTimeout == 0 {
		p.writeTimeout = -1
	}
	p.maxResponse = o.maxResponse
	if o.quotaInFlight < 0 {
		return nil, fmt.Errorf("--scope-quota-inflight must not be negative (0: no limit), got %d", o.quotaInFlight)
	}
	p.quota.InFlight = o.quotaInFlight
	if o.quotaRate != "" {
		if p.quota.Rate, p.quota.Per, err = idemhttp.ParseRate(o.quotaRate); err != nil {
			return nil, fmt.Errorf("--scope-quota-rate: %w", err)
		}
	}
	if o.keyFile != "" {
		if p.keys, err = idem.LoadKeyring(o.keyFile); err != nil {
			return nil, fmt.Errorf("--encryption-key-file: %w", err)
		}
	}
	return &p, nil
}

func runProxy(ctx context.Context, e *env, o proxyOpts, p *plan) error {
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	st, err := storeopen.Open(ctx, o.store, storeopen.Options{Migrate: o.migrate})
	if err != nil {
		return err
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := idemprom.New(reg)
	if err != nil {
		return err
	}
	var spool *idem.Spool
	if o.spool != "" {
		d, err := storeopen.Parse(o.store)
		if err != nil {
			return err
		}
		// The spool is bound to this store: another store's engine
		// opening the directory is refused, never handed our outcomes.
		if spool, err = idem.OpenSpoolFor(o.spool, d.Identity()); err != nil {
			return err
		}
		if n := spool.Len(); n > 0 {
			log.Warn("idem proxy: outcomes left in the spool by an earlier run; applying them as soon as the store answers", "spool", o.spool, "count", n)
		}
		if bad := spool.Unreadable(); len(bad) > 0 {
			log.Error("idem proxy: spool files that cannot be read were left in place", "spool", o.spool, "files", bad)
		}
	}
	eng, err := idem.New(st, idem.Config{TTL: *o.ttl, Cover: o.cover, Lease: *o.lease, InFlight: p.inFlight,
		Wait: p.wait, Observer: obs, Logger: log, Spool: spool, FinishTimeout: *o.finishTimeout,
		EffectTimeout: effectTimeout(p.upstreamTimeout), AllowVolatileStore: o.allowVolatile,
		AllowAsyncReplication: o.allowAsync, Encryption: p.keys, ReplayCache: replayCacheConfig(*o.replayCache)})
	if err != nil {
		return err
	}
	defer eng.Close()
	if p.scopeFn, err = p.scope.scopeFunc(ctx, log); err != nil {
		return err
	}
	if o.secretFile != "" {
		if p.digestSecret, err = readDigestSecret(o.secretFile); err != nil {
			return err
		}
	}
	h, err := proxyHandler(eng, o, p, log)
	if err != nil {
		return err
	}
	unkeyed, err := idemprom.NewUnkeyedRequests(reg)
	if err != nil {
		return err
	}
	h = countUnkeyed(h, p.methods, o.requireKey, unkeyed)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: bodyDeadline(h, *o.bodyTimeout, o.maxBody), ReadHeaderTimeout: 30 * time.Second}
	var admin *http.Server
	if o.admin != "" {
		aln, err := net.Listen("tcp", o.admin)
		if err != nil {
			ln.Close()
			return err
		}
		admin = &http.Server{Handler: adminHandler(st, spool, reg), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = admin.Serve(aln) }()
		log.Info("idem proxy admin listening", "addr", aln.Addr().String())
	}
	if !o.requireKey {
		log.Warn(unkeyedWarning, "methods", strings.Join(p.methods, ","))
	}
	if p.scope.mode == scopeGlobal {
		log.Warn("idem proxy: keys share one global scope (--global-scope): any caller can replay any other caller's response by reusing its key")
	}
	if p.keys != nil {
		log.Info("idem proxy: recorded responses and intents are encrypted at rest", "key_id", p.keys.CurrentID(), "keys", len(p.keys.IDs()))
	}
	log.Info("idem proxy listening", append([]any{"addr", ln.Addr().String(), "upstream", p.upstream.String(),
		"store", redacted(o.store), "methods", strings.Join(p.methods, ","), "compat", p.compat.String(),
		"in_flight", o.inFlight, "wait", p.wait.String()}, p.scope.describe()...)...)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// SIGTERM: stop accepting, let in-flight requests finish and record.
	log.Info("idem proxy shutting down; waiting for in-flight requests", "timeout", o.shutdown.String())
	sctx, cancel := context.WithTimeout(context.Background(), *o.shutdown)
	defer cancel()
	err = srv.Shutdown(sctx)
	if admin != nil {
		_ = admin.Shutdown(sctx)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w (unfinished requests become unknown after their lease)", err)
	}
	log.Info("idem proxy stopped")
	return nil
}

// statusList is statuses as --release-status takes them.
func statusList(statuses []int) string {
	s := make([]string, len(statuses))
	for i, n := range statuses {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// readDigestSecret reads --digest-secret-file: its bytes, without the
// white space around them, at least idemhttp.MinDigestSecret of them.
func readDigestSecret(path string) ([]byte, error) {
	b, err := readSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("--digest-secret-file: %w", err)
	}
	if len(b) < idemhttp.MinDigestSecret {
		return nil, fmt.Errorf("--digest-secret-file %s: the secret has %d bytes, want at least %d (e.g. head -c 32 /dev/urandom | base64 > %s)", path, len(b), idemhttp.MinDigestSecret, path)
	}
	return b, nil
}

func redacted(dsn string) string {
	d, err := storeopen.Parse(dsn)
	if err != nil {
		return "(invalid)"
	}
	return d.Redacted()
}

// effectTimeout is the engine's bound on one proxied request: the
// upstream's own timeout, which ends the exchange first and says why, with
// room to record it; without one, a day.
func effectTimeout(upstream time.Duration) time.Duration {
	if upstream <= 0 {
		return 24 * time.Hour
	}
	return upstream + 5*time.Second
}

// DefaultSpool is the proxy's default spool directory, next to the
// default SQLite store in the working directory.
const DefaultSpool = "idem-spool"

// adminHandler serves /metrics and /healthz. /healthz answers 200 "ok"
// when the store answers, 503 when it does not, and in both cases says
// how many outcomes wait in the spool (spooled_outcomes N).
func adminHandler(st idem.Store, spool *idem.Spool, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promHandler(reg))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, "ok\n"
		if _, err := st.Get(ctx, "", "idem-healthz-probe"); err != nil && !errors.Is(err, idem.ErrNotFound) {
			status, body = http.StatusServiceUnavailable, "store unavailable\n"
		}
		if spool != nil {
			// Outcomes (or abandoned claims) the store has not taken yet,
			// and files the engine will never apply (unreadable, or
			// another store's), make the proxy degraded: it serves, but
			// something waits on the store or on an operator.
			pending, bad, foreign := spool.Len(), len(spool.Unreadable()), len(spool.Foreign())
			if status == http.StatusOK && pending+bad+foreign > 0 {
				body = "degraded\n"
			}
			body += fmt.Sprintf("spooled_outcomes %d\n", pending)
			if bad+foreign > 0 {
				body += fmt.Sprintf("unreadable_spool_files %d\nforeign_spool_files %d\n", bad, foreign)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
	return mux
}

// replayCacheConfig is the engine's replay cache for --replay-cache: age 0
// turns it off.
func replayCacheConfig(age time.Duration) idem.ReplayCacheConfig {
	if age == 0 {
		return idem.ReplayCacheConfig{MaxBytes: -1}
	}
	return idem.ReplayCacheConfig{MaxAge: age}
}
