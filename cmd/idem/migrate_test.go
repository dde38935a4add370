package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
)

// A DSN the store would refuse is a usage error (exit 2) with the reason on
// stderr and nothing on stdout, with or without --print; it used to print a
// lone SQL comment, or the script for schema "public", and exit 0. Port 1
// has no server: should parsing regress, migrate cannot touch a database.
func TestMigrateRefusesBadDSN(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://127.0.0.1:1/test?schema=" + strings.Repeat("s", 70): "Config.Schema",
		"postgres://127.0.0.1:1/test?schema=bad;name":                   "semicolon",
		"mysql://root@127.0.0.1:1/test?table=bad;name":                  "semicolon",
		"mysql://root@127.0.0.1:1/test?table=bad-name":                  "Config.Table",
	} {
		for _, args := range [][]string{{"migrate", "--print", "--store", dsn}, {"migrate", "--store", dsn}} {
			o, e, code := runCLI(args...)
			if code != exitUsage || o != "" || !strings.Contains(e, want) {
				t.Errorf("%q: code %d, stdout %q, stderr %q; want 2, nothing, %q", args, code, o, e, want)
			}
		}
	}
}

// Stores without an SQL schema: migrate says so and succeeds (nothing to
// do); --print has nothing to print and is refused.
func TestMigrateStoreWithoutSchema(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"memory://", "redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1,127.0.0.1:2"} {
		o, e, code := runCLI("migrate", "--print", "--store", dsn)
		if code != exitUsage || o != "" || !strings.Contains(e, "no SQL schema") || !strings.Contains(e, "nothing to print") {
			t.Errorf("migrate --print --store %s: code %d, stdout %q, stderr %q", dsn, code, o, e)
		}
		o, e, code = runCLI("migrate", "--store", dsn)
		if code != exitOK || o != "" || !strings.Contains(e, "nothing to migrate") {
			t.Errorf("migrate --store %s: code %d, stdout %q, stderr %q", dsn, code, o, e)
		}
	}
}

// The printed script, applied by another tool, leaves `idem migrate`
// nothing to do.
func TestMigratePrintThenMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "h.db")
		dsn := "sqlite://" + path
		script, e, code := runCLI("migrate", "--print", "--store", dsn)
		if code != exitOK || !strings.Contains(script, "CREATE TABLE idem_records") {
			t.Fatalf("migrate --print: code %d, stderr %q, script:\n%s", code, e, script)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("--print touched the database file: %v", err)
		}
		db, err := sql.Open("sqlite", path) // what `sqlite3 h.db < script` does
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, script); err != nil {
			t.Fatalf("apply printed script: %v", err)
		}
		if o, e, code := runCLI("migrate", "--store", dsn); code != exitOK || o != dsn+" is up to date at version 1\n" {
			t.Fatalf("migrate after the printed script: code %d, stdout %q, stderr %q; want up to date at version 1", code, o, e)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM idem_migrations`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("idem_migrations rows = %d, %v; want 1", n, err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.DSN(t)
		script, e, code := runCLI("migrate", "--print", "--store", dsn)
		if code != exitOK || !strings.Contains(script, "_migrations") {
			t.Fatalf("migrate --print: code %d, stderr %q, script:\n%s", code, e, script)
		}
		conn, err := pgx.Connect(ctx, testenv.Postgres.Need(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, script); err != nil {
			t.Fatalf("apply printed script: %v", err)
		}
		if o, e, code := runCLI("migrate", "--store", dsn); code != exitOK || !strings.HasSuffix(o, " is up to date at version 4\n") {
			t.Fatalf("migrate after the printed script: code %d, stdout %q, stderr %q; want up to date at version 4", code, o, e)
		}
	})
}

// TestMigrateSaysWhatItDid: a first migrate names the versions it moved
// the schema between; a second says the schema is up to date.
func TestMigrateSaysWhatItDid(t *testing.T) {
	t.Parallel()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	if o, e, code := runCLI("migrate", "--store", dsn); code != exitOK || o != "migrated "+dsn+" from version 0 to 1\n" {
		t.Fatalf("first migrate: code %d, stdout %q, stderr %q", code, o, e)
	}
	if o, e, code := runCLI("migrate", "--store", dsn); code != exitOK || o != dsn+" is up to date at version 1\n" {
		t.Fatalf("second migrate: code %d, stdout %q, stderr %q", code, o, e)
	}
}
