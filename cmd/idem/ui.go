package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/cmd/idem/internal/ui"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/httpprovider"
)

// DefaultUIAuditLog is the dashboard's default audit log, in the working
// directory as the proxy's spool is.
const DefaultUIAuditLog = "idem-ui-audit.jsonl"

// DefaultUIListen is where idem ui listens unless told otherwise: the
// loopback interface only.
const DefaultUIListen = "127.0.0.1:8788"

func cmdUI(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("ui",
		"idem ui [--store DSN] --token-file FILE [--listen ADDR] [--operator NAME] [--metrics-url URL [--metrics-every DUR]] [--reconcile-report FILE] [--audit-log FILE] [--provider-url TEMPLATE [--provider-header 'NAME: VALUE']] [--ttl DUR] [--encryption-key-file FILE] [--allow-remote]",
		"Serve the operator dashboard: counts by state and outcomes over time, the\n"+
			"unknown records oldest first, and a page per record with a form that\n"+
			"decides it exactly as idem resolve does (fenced, logged with who and why,\n"+
			"refused if the record changed since the page was loaded).\n"+
			"Every page needs the token of --token-file (a login form sets an HttpOnly,\n"+
			"SameSite=Strict cookie). The dashboard listens on loopback only; a\n"+
			"non-loopback --listen is refused unless --allow-remote (then put it behind\n"+
			"TLS: the token and the cookie cross the network in clear otherwise).",
		"idem ui --store postgres://idem@db:5432/app --token-file ~/.idem-ui-token --metrics-url http://127.0.0.1:9090/metrics")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	listen := f.String("listen", DefaultUIListen, "address to listen on (loopback unless --allow-remote)")
	tokenFile := f.String("token-file", "", "file holding the login token, at least 16 bytes (required)")
	operator := f.String("operator", "", "name every decision is logged with (default: the name given at login)")
	metricsURL := f.String("metrics-url", "", "a proxy's /metrics, sampled for outcomes over time and the duplicate ratio (default: drawn from the store)")
	metricsEvery := f.duration("metrics-every", 15*time.Second, "how often --metrics-url is sampled")
	reconcileReport := f.String("reconcile-report", "", "the JSON report of idem reconcile --json to show on the overview")
	auditLog := f.String("audit-log", DefaultUIAuditLog, "append every decision to this file (JSON lines, fsync'd) and show a record's past decisions on its page (empty: stderr only)")
	ttl := f.duration("ttl", 24*time.Hour, "how long a succeeded/failed decision replays")
	providerURL := f.String("provider-url", "", "the provider's lookup URL template with {key}, as idem reconcile's: record pages ask it what it did for the key, and a bulk succeeded can use its object as the body")
	var providerHdr providerHeaders
	f.Var(&providerHdr, "provider-header", "with --provider-url: `NAME: VALUE` header to send (repeatable)")
	allowRemote := f.Bool("allow-remote", false, "listen on a non-loopback address and answer to any Host name")
	keyFile := f.keyFile()
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if *tokenFile == "" {
		return f.usageError("--token-file is required: every page of the dashboard needs its token")
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return f.usageError("--listen: %v", err)
	}
	if !*allowRemote && !ui.IsLoopbackAddr(*listen) {
		return f.usageError("--listen %s is not a loopback address: the dashboard decides records, so it listens on 127.0.0.1 or [::1] unless --allow-remote", *listen)
	}
	if *metricsEvery <= 0 {
		return f.usageError("--metrics-every must be positive")
	}
	if *metricsURL != "" {
		if u, err := url.Parse(*metricsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return f.usageError("--metrics-url must be an http(s) URL, got %q", *metricsURL)
		}
	}
	var provider reconcile.Provider
	if *providerURL != "" {
		p, err := httpprovider.New(httpprovider.Config{URLTemplate: *providerURL, Header: http.Header(providerHdr)})
		if err != nil {
			return f.usageError("--provider-url: %v", err)
		}
		provider = p
	} else if len(providerHdr) > 0 {
		return f.usageError("--provider-header goes with --provider-url")
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return f.usageError("--token-file: %v", err)
	}
	keys, code, ok := f.loadKeys(*keyFile)
	if !ok {
		return code
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	if err := serveUI(ctx, st, log, uiOptions{dsn: *dsn, listen: *listen, token: token, operator: *operator,
		metricsURL: *metricsURL, metricsEvery: *metricsEvery, reconcileReport: *reconcileReport, auditLog: *auditLog, ttl: *ttl, allowRemote: *allowRemote, keys: keys, provider: provider}); err != nil {
		return f.fail(err)
	}
	return exitOK
}

type uiOptions struct {
	dsn, listen, operator, metricsURL, reconcileReport, auditLog string
	token                                                        []byte
	ttl, metricsEvery                                            time.Duration
	allowRemote                                                  bool
	// keys opens records encrypted at rest; nil: none.
	keys *idem.Keyring
	// provider answers lookups by forwarded key (--provider-url); nil: none.
	provider reconcile.Provider
}

// readToken reads the login token: the file's content without surrounding
// white space (a trailing newline is not part of it).
func readToken(path string) ([]byte, error) {
	b, err := readSecretFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("%s holds %d bytes; a token needs at least 16 (e.g. openssl rand -hex 32 > %s)", path, len(b), path)
	}
	return b, nil
}

func serveUI(ctx context.Context, st idem.Store, log *slog.Logger, o uiOptions) error {
	var shown idem.Store = st
	if o.keys != nil {
		shown = openingStore{Store: st, keys: o.keys}
	}
	srv, err := ui.New(ui.Config{Store: shown, Token: o.token, Operator: o.operator, MetricsURL: o.metricsURL, MetricsEvery: o.metricsEvery,
		ReconcileReport: o.reconcileReport, AuditLog: o.auditLog, Logger: log, AllowRemote: o.allowRemote, Provider: o.provider,
		Decide: func(ctx context.Context, d ui.Decision) (*idem.Record, error) {
			return decide(ctx, st, log, operatorDecision{Scope: d.Scope, Key: idem.Key(d.Key), As: d.As, Status: d.Status,
				Body: d.Body, HasBody: d.HasBody, ContentType: d.ContentType, Reason: d.Reason, Actor: d.Operator,
				IfFence: d.IfFence, TTL: o.ttl, Keys: o.keys})
		}})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute}
	if o.allowRemote && !ui.IsLoopbackAddr(o.listen) {
		log.Warn("idem ui: listening beyond loopback (--allow-remote): serve it behind TLS, the token and the session cookie travel in clear otherwise")
	}
	log.Info("idem ui listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/", "store", redacted(o.dsn))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("idem ui stopped")
	return nil
}
