package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
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
	f := e.newFlags("get", "idem get [--store DSN] [--scope S] KEY [--json] [--body-out FILE]",
		"Show the record for KEY in scope S (empty: the global scope): its state, the\n"+
			"intent written with the claim, and the response a retry replays (status,\n"+
			"headers, and the body when it is text). KEY may be given as the\n"+
			"Idempotency-Key header carries it ('\"order-42\"').",
		"idem get --store sqlite://idem.db order-42 --json")
	dsn := f.String("store", storeopen.Default, "store DSN: sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, memory://")
	scope := f.String("scope", "", "the key's scope (the proxy stores --scope-header values as SHA-256 hex)")
	asJSON := f.Bool("json", false, "print the record as JSON, with the intent and the response decoded")
	bodyOut := f.String("body-out", "", "write the recorded response's body (or the result) to this file")
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
	f := e.newFlags("list", "idem list [--store DSN] [--state STATE] [--older-than DUR] [--scope S] [--limit N] [--spool DIR] [--json]",
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
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
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
	var spooled []idem.SpooledOutcome
	if *spoolDir != "" {
		var bad []string
		if spooled, bad, err = idem.ReadSpool(*spoolDir); err != nil {
			return f.fail(err)
		}
		if len(bad) > 0 {
			fmt.Fprintf(e.stderr, "idem list: %d spool files in %s cannot be read: %s\n", len(bad), *spoolDir, strings.Join(bad, ", "))
		}
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
		return exitOK
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
		return exitFailureIf(err)
	}
	fmt.Fprintf(e.stdout, "\n%d outcomes spooled in %s, applied to the store when it answers:\n", len(spooled), *spoolDir)
	fmt.Fprintln(tw, "KEY\tSCOPE\tOUTCOME\tFENCE\tSTATUS\tSPOOLED")
	for i := range spooled {
		o := &spooled[i]
		r := idem.Record{Result: o.Result}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", o.Key, shortScope(o.Scope), spooledOutcome(o), o.Fence,
			httpStatus(&r), o.SpooledAt.Format(time.RFC3339))
	}
	return exitFailureIf(tw.Flush())
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
		"idem resolve [--store DSN] [--scope S] KEY --as succeeded|failed|released --reason TEXT [--status N] [--body FILE] [--content-type T] [--actor NAME] [--force] [--if-fence N] [--ttl DUR]",
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
	res := idem.Resolution{Force: *force, Actor: *actor, Reason: *reason, IfFence: *ifFence}
	if *ifFence < 0 {
		return f.usageError("--if-fence must not be negative")
	}
	switch *as {
	case "released":
		res.Release = true
		if *status != 0 || *bodyFile != "" {
			return f.usageError("--status and --body make no sense with --as released")
		}
	case "succeeded", "failed":
		res.As = idem.State(*as)
		if _, err := recordedBody(*as, *status, "", ""); err != nil {
			return f.usageError("%v", err)
		}
	default:
		return f.usageError("--as must be succeeded, failed or released, got %q", *as)
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	// An operator decides records on whatever store holds them; idem
	// doctor, not resolve, judges whether the store can forget.
	eng, err := idem.New(st, idem.Config{TTL: *ttl, Logger: log, AllowVolatileStore: true})
	if err != nil {
		return f.fail(err)
	}
	defer eng.Close()
	if err := markExpiredUnknown(ctx, st, *scope, key); err != nil {
		return f.fail(err)
	}
	if !res.Release {
		cur, err := st.Get(ctx, *scope, string(key))
		if errors.Is(err, idem.ErrNotFound) {
			return f.fail(fmt.Errorf("no record for key %q in scope %q", key, *scope))
		}
		if err != nil {
			return f.fail(err)
		}
		b, err := resolvedResult(cur, *as, *status, *bodyFile, *ctype, *reason)
		if err != nil {
			return f.fail(err)
		}
		res.Result = b
	}
	rec, err := eng.Resolve(ctx, *scope, key, res)
	if err != nil {
		if errors.Is(err, idem.ErrNotFound) {
			return f.fail(fmt.Errorf("no record for key %q in scope %q", key, *scope))
		}
		if errors.Is(err, idem.ErrFenced) && *ifFence != 0 {
			return f.fail(fmt.Errorf("record %q moved on from fence %d (decided or re-claimed meanwhile); look at it again with idem get", key, *ifFence))
		}
		if errors.Is(err, idem.ErrFenced) && !*force {
			return f.fail(notUnknown(ctx, st, *scope, key, err))
		}
		return f.fail(err)
	}
	if rec == nil {
		fmt.Fprintf(e.stdout, "released %s: the next request with this key runs\n", key)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "resolved %s as %s (fence %d)\n", key, rec.State, rec.Fence)
	return exitOK
}

// resolvedResult is what an operator's resolution records on rec, in the
// form whatever made rec decodes: a recorded HTTP response for a record made
// by idemhttp or idem proxy, the application's value (the --body file as
// it is, or for a failure the reason) for a record made by an engine caller.
func resolvedResult(rec *idem.Record, as string, status int, bodyFile, ctype, reason string) ([]byte, error) {
	if idemhttp.MadeRecord(rec) {
		return recordedBody(as, status, bodyFile, ctype)
	}
	if status != 0 || ctype != "" {
		return nil, fmt.Errorf("record %q was made by an application through the engine, not over HTTP: its result is the application's value, so --status and --content-type do not apply; give --body FILE holding the value as the application's codec writes it (JSON by default)", rec.Key)
	}
	if bodyFile == "" {
		if as == "failed" {
			return []byte(reason), nil
		}
		return nil, fmt.Errorf("record %q was made by an application through the engine: --as succeeded needs --body FILE holding the value its retries replay (as the application's codec writes it, JSON by default)", rec.Key)
	}
	b, err := os.ReadFile(bodyFile)
	if err != nil {
		return nil, fmt.Errorf("--body: %w", err)
	}
	return b, nil
}

// recordedBody builds the recorded response an operator's resolution
// replays.
func recordedBody(as string, status int, bodyFile, ctype string) ([]byte, error) {
	if status == 0 {
		status = http.StatusOK
		if as == "failed" {
			status = http.StatusInternalServerError
		}
	}
	if status < 200 || status > 599 {
		return nil, fmt.Errorf("--status %d is not a final HTTP status", status)
	}
	rr := &idemhttp.RecordedResponse{Status: status}
	if bodyFile != "" {
		b, err := os.ReadFile(bodyFile)
		if err != nil {
			return nil, fmt.Errorf("--body: %w", err)
		}
		rr.Body, rr.Size = b, int64(len(b))
		if ctype == "" && len(b) > 0 {
			ctype = detectContentType(b)
		}
	}
	if ctype != "" {
		rr.Header = http.Header{"Content-Type": {ctype}}
	}
	return rr.Encode()
}

// detectContentType is application/json for a JSON text, which
// http.DetectContentType would call text/plain, and its sniffing otherwise.
func detectContentType(b []byte) string {
	if json.Valid(b) {
		return "application/json"
	}
	return http.DetectContentType(b)
}

// notUnknown explains, in the command's own terms, why Resolve refused a
// record without --force: it names the record's state and the flag.
func notUnknown(ctx context.Context, st idem.Store, scope string, key idem.Key, err error) error {
	rec, gerr := st.Get(ctx, scope, string(key))
	switch {
	case errors.Is(gerr, idem.ErrNotFound):
		return fmt.Errorf("no record for key %q in scope %q (it was released meanwhile)", key, scope)
	case gerr != nil:
		return err
	case rec.State == idem.StateInProgress:
		return fmt.Errorf("record %q is in_progress, not unknown: its request is still running and may finish; --force changes it anyway", key)
	}
	return fmt.Errorf("record %q is %s, not unknown; --force changes a decided record", key, rec.State)
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
		if string(effectiveState(r, now)) == state {
			out = append(out, *r)
		}
	}
	return out
}

// markExpiredUnknown writes unknown on an in_progress record whose lease
// has passed, as the engine does when it reads one, so that an operator can
// resolve it without --force.
func markExpiredUnknown(ctx context.Context, st idem.Store, scope string, key idem.Key) error {
	rec, err := st.Get(ctx, scope, string(key))
	if err != nil {
		if errors.Is(err, idem.ErrNotFound) {
			return nil
		}
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if !rec.LeaseExpired(now) {
		return nil
	}
	_, err = st.Finish(ctx, idem.FinishParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence,
		AttemptID: rec.AttemptID, State: idem.StateUnknown, CompletedAt: now})
	if errors.Is(err, idem.ErrFenced) {
		return nil // it moved on meanwhile; Resolve decides on what is there now
	}
	return err
}

// Output.
