package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/pgstore"
)

// TestMigrateConcurrent starts eight stores on one fresh schema at once, as
// replicas of a service do; the advisory lock must let exactly one apply
// each migration.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := freshSchema(t, pool)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Migrate: true})
			if err == nil {
				err = s.Migrate(ctx) // and again: nothing to do
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "idem_records_migrations"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 { // one row per migration, each applied once
		t.Fatalf("migrations table has %d rows, want 4", n)
	}
	checkPrimaryKey(t, schema, "idem_records")
}

// TestMigrationsScriptApplies applies the printed script the way an external tool
// would, then checks that Migrate sees it as applied and the table has its
// primary key.
func TestMigrationsScriptApplies(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := freshSchema(t, pool)
	script, err := pgstore.MigrationsScript(pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, pgx.Identifier{schema, "idem_records"}.Sanitize()) {
		t.Fatalf("script does not name the schema-qualified table:\n%s", script)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, script); err != nil {
		t.Fatalf("apply printed script: %v\n%s", err, script)
	}
	s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatalf("Migrate after the printed script: %v", err)
	}
	s.Close()
	checkPrimaryKey(t, schema, "idem_records")
	if def, err := pgstore.MigrationsScript(pgstore.Config{}); err != nil || !strings.Contains(def, `"public"."idem_records"`) {
		t.Fatalf("MigrationsScript(Config{}) does not default to public: %v", err)
	}
}

// checkPrimaryKey asserts the table's primary key is exactly (scope, key).
func checkPrimaryKey(t *testing.T, schema, table string) {
	t.Helper()
	var cols string
	err := sharedPool().QueryRow(context.Background(), `
		SELECT string_agg(a.attname, ',' ORDER BY k.ord)
		FROM pg_index i
		JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indisprimary AND i.indrelid = $1::regclass`, pgx.Identifier{schema, table}.Sanitize()).Scan(&cols)
	if err != nil || cols != "scope,key" {
		t.Fatalf("primary key of %s.%s = %q (%v), want scope,key", schema, table, cols, err)
	}
}

// TestMigrationsScript: an invalid name is an error, not a script; a valid
// table and schema are applied by the printed script as Migrate would.
func TestMigrationsScript(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 70)
	if script, err := pgstore.MigrationsScript(pgstore.Config{Schema: long}); err == nil || script != "" ||
		!strings.Contains(err.Error(), "Config.Schema") {
		t.Fatalf("MigrationsScript(70-byte schema) = %q, %v; want an error naming Config.Schema", script, err)
	}
	if _, err := pgstore.MigrationsScript(pgstore.Config{Table: long}); err == nil || !strings.Contains(err.Error(), "Config.Table") {
		t.Fatalf("MigrationsScript(70-byte table) = %v; want an error naming Config.Table", err)
	}

	pool := testPool(t)
	cfg := pgstore.Config{Schema: freshSchema(t, pool), Table: "orders_idem"}
	script, err := pgstore.MigrationsScript(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, script); err != nil {
		t.Fatalf("apply printed script: %v\n%s", err, script)
	}
	cfg.Migrate = true
	s, err := pgstore.New(ctx, pool, cfg)
	if err != nil {
		t.Fatalf("Migrate after the printed script: %v", err)
	}
	s.Close()
	checkPrimaryKey(t, cfg.Schema, cfg.Table)
}
