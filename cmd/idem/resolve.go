package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

func cmdResolve(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("resolve",
		"idem resolve [--store DSN] [--scope S] KEY --as succeeded|failed|released --reason TEXT [--status N] [--body FILE] [--content-type T] [--actor NAME] [--force] [--if-fence N] [--ttl DUR] [--encryption-key-file FILE] [--json]",
		"Decide an unknown record: succeeded or failed (what retries replay, in the\n"+
			"form of whatever made the record: over HTTP, a response from --status,\n"+
			"--body and --content-type; over gRPC, the response from --body as protojson,\n"+
			"or a failure whose message is --reason; by an MCP tool call, the tool result\n"+
			"or text from --body, or a tool error saying --reason; by an application\n"+
			"through the engine, its value from --body, or the failure --reason) or\n"+
			"released (nothing happened: the next retry runs).\n"+
			"A record that is not unknown is refused unless --force. Every resolution is\n"+
			"logged to stderr with who (--actor) and why (--reason).",
		"idem resolve --store sqlite://idem.db order-42 --as released --reason \"upstream has no trace of it\"")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	scope := f.String("scope", "", "the key's scope")
	as := f.String("as", "", "succeeded, failed or released (required)")
	reason := f.String("reason", "", "why the record is resolved this way (required; logged)")
	actor := f.String("actor", currentUser(), "who resolves it (logged)")
	status := f.Int("status", 0, "HTTP status replayed for succeeded/failed (default 200 or 500)")
	bodyFile := f.String("body", "", "file holding the response body replayed for succeeded/failed")
	ctype := f.String("content-type", "", "Content-Type of --body (default: application/json for valid JSON, otherwise detected from the bytes)")
	force := f.Bool("force", false, "change a record that is not unknown")
	ttl := f.duration("ttl", 24*time.Hour, "how long a succeeded/failed resolution replays")
	ifFence := f.Int64("if-fence", 0, "resolve only if the record's fence is still N (as idem get showed it): a decision made meanwhile wins")
	keyFile := f.keyFile()
	asJSON := f.Bool("json", false, "print the decision as one JSON object: scope, key, decision, and the record as idem get --json prints it (null when released; see docs/cli.md)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return f.usageError("want exactly one KEY, got %d arguments", len(pos))
	}
	key, err := cliKey(pos[0])
	if err != nil {
		return f.usageError("%v", err)
	}
	if strings.TrimSpace(*reason) == "" {
		return f.usageError("--reason is required: every resolution is logged with why")
	}
	if *ifFence < 0 {
		return f.usageError("--if-fence must not be negative")
	}
	switch *as {
	case "released":
		if *status != 0 || *bodyFile != "" {
			return f.usageError("--status and --body make no sense with --as released")
		}
	case "succeeded", "failed":
		if *status != 0 && (*status < 200 || *status > 599) {
			return f.usageError("--status %d is not a final HTTP status", *status)
		}
	default:
		return f.usageError("--as must be succeeded, failed or released, got %q", *as)
	}
	d := operatorDecision{Scope: *scope, Key: key, As: *as, Status: *status, ContentType: *ctype,
		Reason: *reason, Actor: *actor, Force: *force, IfFence: *ifFence, TTL: *ttl}
	if *bodyFile != "" {
		if d.Body, err = os.ReadFile(*bodyFile); err != nil {
			return f.fail(fmt.Errorf("--body: %w", err))
		}
		d.HasBody = true
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
	d.Keys = keys
	rec, err := decide(ctx, st, slog.New(slog.NewTextHandler(e.stderr, nil)), d)
	if err != nil {
		return f.fail(err)
	}
	if *asJSON {
		res := resolveResult{Scope: *scope, Key: string(key), Decision: *as}
		if rec != nil {
			j := toJSON(rec, time.Now())
			res.Record = &j
		}
		return writeJSON(f, e.stdout, res)
	}
	if rec == nil {
		fmt.Fprintf(e.stdout, "released %s: the next request with this key runs\n", key)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "resolved %s as %s (fence %d)\n", key, rec.State, rec.Fence)
	return exitOK
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// resolveResult is what idem resolve --json prints.
type resolveResult struct {
	Scope string `json:"scope"`
	Key   string `json:"key"`
	// Decision is succeeded, failed or released.
	Decision string `json:"decision"`
	// Record is the decided record, as idem get --json prints it; null
	// when released.
	Record *recordJSON `json:"record"`
}
