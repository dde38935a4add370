package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
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
	if len(args) > 0 {
		switch args[0] {
		case "passwd":
			return cmdUIPasswd(e, args[1:])
		case "verify-log":
			return cmdUIVerifyLog(e, args[1:])
		}
	}
	f := e.newFlags("ui",
		"idem ui [--store DSN] (--operators-file FILE | --token-file FILE [--operator NAME]) [--listen ADDR] [--metrics-url URL [--metrics-every DUR]] [--reconcile-report FILE] [--audit-log FILE] [--provider-url TEMPLATE [--provider-header 'NAME: VALUE']] [--ttl DUR] [--encryption-key-file FILE] [--allow-remote]\n"+
			"       idem ui passwd NAME [--role viewer|decider] [--json]   (password on standard input)\n"+
			"       idem ui verify-log FILE [--anchor HASH] [--json]",
		"Serve the operator dashboard: counts by state and outcomes over time, the\n"+
			"unknown records oldest first, and a page per record with a form that\n"+
			"decides it exactly as idem resolve does (fenced, checked against what the\n"+
			"record's retries can read, previewed as the next retry will receive it,\n"+
			"logged with who and why, refused if the record changed since the page was\n"+
			"loaded).\n"+
			"Every page needs a login. With --operators-file each operator logs in with\n"+
			"their own name and password (lines made by idem ui passwd) and has a role:\n"+
			"viewer (sees) or decider (also decides). With --token-file everyone shares\n"+
			"one token and types a name nothing verifies: decisions are logged as\n"+
			"token:NAME, and the dashboard warns about it. A login sets an HttpOnly,\n"+
			"SameSite=Strict cookie. The dashboard listens on loopback only; a\n"+
			"non-loopback --listen is refused unless --allow-remote (then put it behind\n"+
			"TLS: passwords and the cookie cross the network in clear otherwise).\n"+
			"idem ui passwd NAME reads a password on standard input and prints the\n"+
			"operators file line. idem ui verify-log FILE checks the audit log's hash\n"+
			"chain: exit 0 intact, 3 broken (the first broken line is named).",
		"idem ui --store postgres://idem@db:5432/app --operators-file /etc/idem/ui-operators --metrics-url http://127.0.0.1:9090/metrics")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	listen := f.String("listen", DefaultUIListen, "address to listen on (loopback unless --allow-remote)")
	operatorsFile := f.String("operators-file", "", "file of operators, one name:bcrypt-hash[:role] a line (idem ui passwd NAME prints one); role viewer or decider, default decider; not readable by other users")
	tokenFile := f.String("token-file", "", "shared-token mode instead of --operators-file: file holding one login token, at least 16 bytes; names typed at login are not verified and are logged as token:NAME")
	operator := f.String("operator", "", "with --token-file: the name every decision is logged with, as token:NAME (default: the name given at login)")
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
	switch {
	case *operatorsFile == "" && *tokenFile == "":
		return f.usageError("--operators-file is required (or --token-file for one shared token): every page of the dashboard needs a login")
	case *operatorsFile != "" && *tokenFile != "":
		return f.usageError("--operators-file and --token-file exclude each other: give each operator a password, or share one token")
	case *operatorsFile != "" && *operator != "":
		return f.usageError("--operator applies to --token-file only: with --operators-file each operator is named by their own login")
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
	var token []byte
	var operators []ui.Operator
	if *tokenFile != "" {
		t, err := readToken(*tokenFile)
		if err != nil {
			return f.usageError("--token-file: %v", err)
		}
		token = t
	} else {
		ops, err := readOperators(*operatorsFile)
		if err != nil {
			return f.usageError("--operators-file: %v", err)
		}
		operators = ops
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
	if token != nil {
		log.Warn("idem ui: shared token mode (--token-file): whoever holds the token logs in under any name; decisions are logged as token:NAME, which nothing verifies. Give each operator a password with --operators-file (idem ui passwd NAME).")
	}
	if err := serveUI(ctx, st, log, uiOptions{dsn: *dsn, listen: *listen, token: token, operators: operators, operator: *operator,
		metricsURL: *metricsURL, metricsEvery: *metricsEvery, reconcileReport: *reconcileReport, auditLog: *auditLog, ttl: *ttl, allowRemote: *allowRemote, keys: keys, provider: provider}); err != nil {
		return f.fail(err)
	}
	return exitOK
}

type uiOptions struct {
	dsn, listen, operator, metricsURL, reconcileReport, auditLog string
	token                                                        []byte
	operators                                                    []ui.Operator
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

// readOperators reads an operators file, refused when other users may
// read or write it (as a token file is): whoever reads the hashes can
// guess passwords offline, whoever writes the file can add themselves.
func readOperators(path string) ([]ui.Operator, error) {
	b, err := readSecretFile(path)
	if err != nil {
		return nil, err
	}
	ops, err := ui.ParseOperators(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}

// uiStdin is where idem ui passwd reads the password (a variable for the
// tests that run commands in process).
var uiStdin io.Reader = os.Stdin

func cmdUIPasswd(e *env, args []string) int {
	f := e.newFlags("ui passwd",
		"idem ui passwd NAME [--role viewer|decider] [--json]",
		"Read a password on standard input (its first line; no echo is turned off,\n"+
			"so pipe it or type it where no one watches) and print the operators file\n"+
			"line for NAME: name:bcrypt-hash:role. Add the line to the file given to\n"+
			"idem ui --operators-file. A password has 8 to 72 bytes (bcrypt reads no\n"+
			"more than 72).",
		"printf '%s\\n' \"$PASSWORD\" | idem ui passwd alice --role decider >> /etc/idem/ui-operators")
	role := f.String("role", string(ui.RoleDecider), "viewer (sees every page) or decider (also decides records)")
	asJSON := f.Bool("json", false, "print {\"operator\", \"role\", \"line\"} as JSON")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return f.usageError("give one operator NAME")
	}
	name := pos[0]
	if err := ui.CheckOperatorName(name); err != nil {
		return f.usageError("%v", err)
	}
	if r := ui.Role(*role); r != ui.RoleViewer && r != ui.RoleDecider {
		return f.usageError("--role must be viewer or decider, got %q", *role)
	}
	line, err := bufio.NewReader(uiStdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return f.fail(err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if pw == "" {
		return f.usageError("no password on standard input")
	}
	if len(pw) < ui.MinPassword || len(pw) > ui.MaxPassword {
		return f.usageError("a password has %d to %d bytes, this one %d", ui.MinPassword, ui.MaxPassword, len(pw))
	}
	hash, err := ui.HashPassword([]byte(pw))
	if err != nil {
		return f.fail(err)
	}
	op := ui.Operator{Name: name, Hash: hash, Role: ui.Role(*role)}
	if *asJSON {
		return writeJSON(f, e.stdout, map[string]string{"operator": name, "role": *role, "line": ui.OperatorLine(op)})
	}
	fmt.Fprintln(e.stdout, ui.OperatorLine(op))
	return exitOK
}

func cmdUIVerifyLog(e *env, args []string) int {
	f := e.newFlags("ui verify-log",
		"idem ui verify-log FILE [--anchor HASH] [--json]",
		"Check an audit log written by idem ui --audit-log: every line a JSON entry,\n"+
			"numbered from 1, whose prev is the SHA-256 of the line before it. An edited,\n"+
			"removed or inserted line, or a log cut in the middle of a line, breaks the\n"+
			"chain: exit 3, naming the first line that does not follow. Lines cut from\n"+
			"the end leave a shorter chain that is whole: give --anchor, a head the\n"+
			"dashboard logged earlier (\"audit log head\" on its stderr) or a previous\n"+
			"run printed, and the log is intact only if a line has that hash.\n"+
			"Exit 0 intact, 3 broken, 1 unreadable.",
		"idem ui verify-log /var/lib/idem/ui-audit.jsonl --anchor 3f1c…")
	anchor := f.String("anchor", "", "hash of a line the log must still hold (a head logged or printed earlier)")
	asJSON := f.Bool("json", false, "print {file, lines, intact, head, broken_line, problem} as JSON")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return f.usageError("give one audit log FILE")
	}
	file, err := os.Open(pos[0])
	if err != nil {
		return f.fail(err)
	}
	defer file.Close()
	rep, err := ui.VerifyAuditLog(file, strings.TrimSpace(*anchor))
	if err != nil {
		return f.fail(fmt.Errorf("%s: %w", pos[0], err))
	}
	code = exitOK
	if !rep.Intact {
		code = exitFindings
	}
	if *asJSON {
		out := struct {
			File string `json:"file"`
			ui.LogReport
		}{pos[0], rep}
		if c := writeJSON(f, e.stdout, out); c != exitOK {
			return c
		}
		return code
	}
	if rep.Intact {
		fmt.Fprintf(e.stdout, "%s: intact, %d lines, head %s\n", pos[0], rep.Lines, rep.Head)
	} else {
		fmt.Fprintf(e.stdout, "%s: broken at line %d: %s\n", pos[0], rep.BrokenLine, rep.Problem)
	}
	return code
}

func serveUI(ctx context.Context, st idem.Store, log *slog.Logger, o uiOptions) error {
	var shown idem.Store = st
	if o.keys != nil {
		shown = openingStore{Store: st, keys: o.keys}
	}
	srv, err := ui.New(ui.Config{Store: shown, Token: o.token, Operators: o.operators, Operator: o.operator, MetricsURL: o.metricsURL, MetricsEvery: o.metricsEvery,
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
