package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/idemhttp"
)

func cmdGet(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("get", "idem get [--store DSN] [--scope S] KEY [--json] [--body-out FILE] [--encryption-key-file FILE]",
		"Show the record for KEY in scope S (empty: the global scope): its state, the\n"+
			"intent written with the claim, and the response a retry replays (status,\n"+
			"headers, and the body when it is text). KEY may be given as the\n"+
			"Idempotency-Key header carries it ('\"order-42\"').",
		"idem get --store sqlite://idem.db order-42 --json")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
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

// cliKey reads a KEY argument: the key itself, or the key as the
// Idempotency-Key header carries it, an sf-string ('"order-42"'), so that
// a value copied from a request log finds its record.
func cliKey(arg string) (idem.Key, error) {
	if len(arg) >= 2 && arg[0] == '"' && arg[len(arg)-1] == '"' {
		return idemhttp.ParseKeyHeader(arg)
	}
	return idem.ParseKey(arg)
}
