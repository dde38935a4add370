package main

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

func cmdMigrate(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("migrate", "idem migrate [--store DSN] [--print | --json]",
		"Create or upgrade the store's schema. With --print, write the SQL to stdout\ninstead, for teams that run their own migration tool; the script records the\nmigrations it applies, so a later `idem migrate` finds nothing to do.\ndynamodb:// creates the table, its two indexes and TTL; --print gives the\nCreateTable request as JSON (aws dynamodb create-table --cli-input-json).\nmemory://, Redis and NATS stores keep no SQL schema: migrate says so on stderr and\nexits 0 (for nats://, after creating the bucket: replicas and storage from the DSN), and --print, having nothing to print, exits 2.",
		"idem migrate --store postgres://idem@db:5432/app --print > idem.sql")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	print := f.Bool("print", false, "print the schema SQL instead of applying it")
	asJSON := f.Bool("json", false, "print the result as one JSON object: store, schema (false for a store without SQL schema), from_version, version (see docs/cli.md)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	if *print && *asJSON {
		return f.usageError("--print writes SQL, --json a result: give one")
	}
	d, err := storeopen.Parse(*dsn)
	if err != nil {
		return f.usageError("--store: %v", err)
	}
	if !d.HasSchema() && !*print {
		desc, ok, err := storeopen.Provision(ctx, *dsn)
		if err != nil {
			return f.fail(err)
		}
		if ok {
			fmt.Fprintf(e.stderr, "%s: %s (no SQL schema)\n", f.Name(), desc)
			if *asJSON {
				return writeJSON(f, e.stdout, migrateResult{Store: redacted(*dsn)})
			}
			return exitOK
		}
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
		if *asJSON {
			return writeJSON(f, e.stdout, migrateResult{Store: redacted(*dsn)})
		}
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
	if *asJSON {
		res := migrateResult{Store: redacted(*dsn), Schema: true}
		if before >= 0 {
			res.From = &before
		}
		if after >= 0 {
			res.Version = &after
		}
		return writeJSON(f, e.stdout, res)
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

// migrateResult is what idem migrate --json prints.
type migrateResult struct {
	// Store is the DSN, its password redacted.
	Store string `json:"store"`
	// Schema is false for a store that keeps no SQL schema (memory://,
	// Redis): nothing was migrated.
	Schema bool `json:"schema"`
	// From is the schema version before (0: none yet), Version after;
	// null when the store cannot say.
	From    *int `json:"from_version"`
	Version *int `json:"version"`
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
