package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/idemhttp"
)

func cmdMigrate(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("migrate", "idem migrate [--store DSN] [--print]",
		"Create or upgrade the store's schema. With --print, write the SQL to stdout\ninstead, for teams that run their own migration tool; the script records the\nmigrations it applies, so a later `idem migrate` finds nothing to do.\nmemory:// and Redis stores keep no SQL schema: migrate says so on stderr and\nexits 0, and --print, having nothing to print, exits 2.",
		"idem migrate --store postgres://idem@db:5432/app --print > idem.sql")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
	print := f.Bool("print", false, "print the schema SQL instead of applying it")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	d, err := storeopen.Parse(*dsn)
	if err != nil {
		return f.usageError("--store: %v", err)
	}
	if !d.HasSchema() {
		// Nothing to migrate is not a failure: deployment scripts run
		// migrate whatever the store. But an empty stdout and exit 0 from
		// --print would pass for an empty script.
		if *print {
			fmt.Fprintf(e.stderr, "%s: a %s:// store keeps no SQL schema: nothing to print\n", f.Name(), d.Scheme)
			return exitUsage
		}
		fmt.Fprintf(e.stderr, "%s: a %s:// store keeps no SQL schema: nothing to migrate\n", f.Name(), d.Scheme)
		return exitOK
	}
	if *print {
		sql, err := storeopen.MigrationsSQL(*dsn)
		if err != nil {
			return f.fail(err)
		}
		fmt.Fprint(e.stdout, sql)
		return exitOK
	}
	before := schemaVersion(ctx, *dsn)
	st, err := storeopen.Open(ctx, *dsn, storeopen.Options{Migrate: true})
	if err != nil {
		return f.fail(err)
	}
	defer st.Close()
	after := -1
	if sc, ok := st.(schemaChecker); ok {
		if v, _, err := sc.CheckSchema(ctx); err == nil {
			after = v
		}
	}
	switch {
	case after < 0:
		fmt.Fprintf(e.stdout, "migrated %s\n", redacted(*dsn))
	case before == after:
		fmt.Fprintf(e.stdout, "%s is up to date at version %d\n", redacted(*dsn), after)
	default:
		fmt.Fprintf(e.stdout, "migrated %s from version %d to %d\n", redacted(*dsn), max(before, 0), after)
	}
	return exitOK
}

// schemaVersion is the schema version a store holds before migrating: 0
// for a store with none yet, -1 when it cannot be read.
func schemaVersion(ctx context.Context, dsn string) int {
	st, err := storeopen.Open(ctx, dsn, storeopen.Options{})
	if err != nil {
		return -1
	}
	defer st.Close()
	sc, ok := st.(schemaChecker)
	if !ok {
		return -1
	}
	v, _, err := sc.CheckSchema(ctx)
	if err != nil {
		return -1
	}
	return v
}

// openExisting opens a store for the record commands: never creating a new
// database, never migrating, and never memory://, which starts empty in
// every process — a list of it would look like an empty store.
func openExisting(ctx context.Context, f *flags, dsn string) (idem.Store, int, bool) {
	d, err := storeopen.Parse(dsn)
	if err != nil {
		return nil, f.usageError("--store: %v", err), false
	}
	if d.Scheme == "memory" {
		return nil, f.usageError("--store: memory:// starts empty in every process, so it holds no records to read; name the store the proxy or application writes to"), false
	}
	st, err := storeopen.Open(ctx, dsn, storeopen.Options{MustExist: true})
	if err != nil {
		return nil, f.fail(err), false
	}
	return st, 0, true
}

func cmdGet(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("get", "idem get [--store DSN] [--scope S] KEY [--json] [--body-out FILE] [--encryption-key-file FILE]",
		"Show the record for KEY in scope S (empty: the global scope): its state, the\n"+
			"intent written with the claim, and the response a retry replays (status,\n"+
			"headers, and the body when it is text). KEY may be given as the\n"+
			"Idempotency-Key header carries it ('\"order-42\"').",
		"idem get --store sqlite://idem.db order-42 --json")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
	scope := f.String("scope", "", "the key's scope: the principal as the proxy's --scope-header or --scope-jwt gives it (empty with --global-scope)")
	asJSON := f.Bool("json", false, "print the record as JSON, with the intent and the response decoded")
	bodyOut := f.String("body-out", "", "write the recorded response's body (or the result) to this file")
	keyFile := f.keyFile()
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
	keys, code, ok := f.loadKeys(*keyFile)
	if !ok {
		return code
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	rec, err := st.Get(ctx, *scope, string(key))
	if errors.Is(err, idem.ErrNotFound) {
		return f.fail(fmt.Errorf("no record for key %q in scope %q", key, *scope))
	}
	if err != nil {
		return f.fail(err)
	}
	if err := keys.OpenRecord(rec); err != nil {
		return f.fail(err)
	}
	if *bodyOut != "" {
		if err := os.WriteFile(*bodyOut, bodyBytes(rec), 0o600); err != nil {
			return f.fail(err)
		}
	}
	if *asJSON {
		return writeJSON(f, e.stdout, toJSON(rec, time.Now()))
	}
	printRecord(e.stdout, rec, time.Now())
	return exitOK
}

func cmdList(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("list", "idem list [--store DSN] [--state STATE] [--older-than DUR] [--scope S] [--limit N] [--spool DIR] [--json] [--encryption-key-file FILE]",
		"List records, oldest first, as a table (or JSON lines with --json), and the\n"+
			"outcomes waiting in the proxy's spool for the store to take them.",
		"idem list --store sqlite://idem.db --state unknown --older-than 1h")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
	state := f.String("state", "", "only records in this state: in_progress, succeeded, failed or unknown")
	olderThan := f.duration("older-than", 0, "only records created longer ago than this (e.g. 15m, 2d)")
	scope := f.String("scope", "", "only records in this scope")
	limit := f.Int("limit", 1000, "at most this many records (0: all)")
	asJSON := f.Bool("json", false, "print one JSON object per line")
	spoolDir := f.String("spool", DefaultSpool, "the proxy's spool directory, whose waiting outcomes are listed too (empty: none)")
	keyFile := f.keyFile()
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	keys, code, ok := f.loadKeys(*keyFile)
	if !ok {
		return code
	}
	filter := idem.ListFilter{Scope: *scope, Limit: *limit}
	if *state != "" {
		s, err := idem.ParseState(*state)
		if err != nil {
			return f.usageError("--state: %v", err)
		}
		filter.States = []idem.State{s}
		if s == idem.StateUnknown {
			// An in_progress record whose lease has passed is unknown to
			// every reader; list it with the unknown ones.
			filter.States = append(filter.States, idem.StateInProgress)
		}
	}
	now := time.Now()
	if *olderThan > 0 {
		filter.CreatedBefore = now.Add(-*olderThan).UTC()
	}
	if *limit < 0 {
		return f.usageError("--limit must not be negative")
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	recs, err := st.List(ctx, filter)
	if err != nil {
		return f.fail(err)
	}
	if *state != "" {
		recs = byEffectiveState(recs, *state, now)
	}
	// A record encrypted with a key not in the key file is listed
	// without its intent and response, and makes the exit status 1.
	sealed := map[string]int{}
	for i := range recs {
		if err := keys.OpenRecord(&recs[i]); err != nil {
			sealed[sealedID(&recs[i])]++
			recs[i].Intent, recs[i].Result = nil, nil
		}
	}
	var spooled []idem.SpooledOutcome
	if *spoolDir != "" {
		var bad []string
		if spooled, bad, err = idem.ReadSpool(*spoolDir); err != nil {
			return f.fail(err)
		}
		if len(bad) > 0 {
			fmt.Fprintf(e.stderr, "idem list: %d spool files in %s cannot be read: %s\n", len(bad), *spoolDir, strings.Join(bad, ", "))
		}
		for i := range spooled {
			o := &spooled[i]
			if res, err := keys.OpenResult(o.Scope, o.Key, o.Result); err == nil {
				o.Result = res
			} else {
				sealed[keyIDOf(o.Result)]++
				o.Result = nil
			}
		}
	}
	if len(sealed) > 0 {
		defer func() {
			for id, n := range sealed {
				fmt.Fprintf(e.stderr, "idem list: %d records are encrypted with key id %q, which --encryption-key-file does not hold: listed without their intent and response\n", n, id)
			}
		}()
	}
	status := func(code int) int {
		if code == exitOK && len(sealed) > 0 {
			return exitFailure
		}
		return code
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for i := range recs {
			if err := enc.Encode(toJSON(&recs[i], now)); err != nil {
				return f.fail(err)
			}
		}
		for i := range spooled {
			if err := enc.Encode(spooledJSON(&spooled[i])); err != nil {
				return f.fail(err)
			}
		}
		return status(exitOK)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSCOPE\tSTATE\tFENCE\tMETHOD\tPATH\tAMOUNT\tSTATUS\tAGE\tCREATED")
	for i := range recs {
		r := &recs[i]
		method, path, amount := intentColumns(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, shortScope(r.Scope), effState(r, now), r.Fence,
			method, path, amount, httpStatus(r), now.Sub(r.CreatedAt).Truncate(time.Second), r.CreatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil || len(spooled) == 0 {
		return status(exitFailureIf(err))
	}
	fmt.Fprintf(e.stdout, "\n%d outcomes spooled in %s, applied to the store when it answers:\n", len(spooled), *spoolDir)
	fmt.Fprintln(tw, "KEY\tSCOPE\tOUTCOME\tFENCE\tSTATUS\tSPOOLED")
	for i := range spooled {
		o := &spooled[i]
		r := idem.Record{Result: o.Result}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", o.Key, shortScope(o.Scope), spooledOutcome(o), o.Fence,
			httpStatus(&r), o.SpooledAt.Format(time.RFC3339))
	}
	return status(exitFailureIf(tw.Flush()))
}

// cliKey reads a KEY argument: the key itself, or the key as the
// Idempotency-Key header carries it, an sf-string ('"order-42"'), so that
// a value copied from a request log finds its record.
func cliKey(arg string) (idem.Key, error) {
	if len(arg) >= 2 && arg[0] == '"' && arg[len(arg)-1] == '"' {
		return idemhttp.ParseKeyHeader(arg)
	}
	return idem.ParseKey(arg)
}

func exitFailureIf(err error) int {
	if err != nil {
		return exitFailure
	}
	return exitOK
}

func cmdResolve(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("resolve",
		"idem resolve [--store DSN] [--scope S] KEY --as succeeded|failed|released --reason TEXT [--status N] [--body FILE] [--content-type T] [--actor NAME] [--force] [--if-fence N] [--ttl DUR] [--encryption-key-file FILE]",
		"Decide an unknown record: succeeded or failed (what retries replay: for a\n"+
			"record made over HTTP, a response from --status and --body; for one made by\n"+
			"an application through the engine, its value from --body, or the failure\n"+
			"--reason) or released (nothing happened: the next retry runs).\n"+
			"A record that is not unknown is refused unless --force. Every resolution is\n"+
			"logged to stderr with who (--actor) and why (--reason).",
		"idem resolve --store sqlite://idem.db order-42 --as released --reason \"upstream has no trace of it\"")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
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

// sweepProgressAfter is how long a sweep runs before it prints progress
// lines on stderr.
var sweepProgressAfter = 2 * time.Second

func cmdSweep(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("sweep", "idem sweep [--store DSN] [--rate ROWS/s]",
		"Delete succeeded and failed records whose retention has passed. In-progress\nand unknown records are never deleted. Records go in batches of 1000; --rate\ncaps how many a second, so a large backlog is cleared beside live traffic.",
		"idem sweep --store postgres://idem@db:5432/app")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
	rate := f.Float64("rate", 0, "at most this many records deleted a second (0: no cap)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0) {
		return f.usageError("--rate must be a number of records a second, 0 or more")
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	start, last := time.Now(), time.Time{}
	n, err := idem.NewSweeper(st, idem.SweeperConfig{MaxRate: *rate, OnBatch: func(sofar int) {
		if now := time.Now(); now.Sub(start) >= sweepProgressAfter && now.Sub(last) >= sweepProgressAfter/2 {
			last = now
			fmt.Fprintf(e.stderr, "idem sweep: %d records deleted (%s)\n", sofar, now.Sub(start).Round(time.Millisecond))
		}
	}}).RunOnce(ctx)
	if err != nil {
		return f.fail(fmt.Errorf("after deleting %d records: %w", n, err))
	}
	fmt.Fprintf(e.stdout, "deleted %d expired records\n", n)
	return exitOK
}

// byEffectiveState keeps the records whose effective state (see effState)
// is state.
func byEffectiveState(recs []idem.Record, state string, now time.Time) []idem.Record {
	out := recs[:0]
	for i := range recs {
		r := &recs[i]
		if string(r.EffectiveState(now)) == state {
			out = append(out, *r)
		}
	}
	return out
}

// Output.
