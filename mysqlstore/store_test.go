package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
)

// TestNewMigrates: New with Migrate applies the schema under its context,
// as Open does, on a pool the caller keeps.
func TestNewMigrates(t *testing.T) {
	db, _ := rawDB(t)
	st, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: testTable(t, db), Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, st, claimParams("k", "a", t0))
	if err := st.Close(); err != nil || db.PingContext(context.Background()) != nil {
		t.Fatalf("Close closed the caller's pool: %v", err)
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	db, _ := rawDB(t)
	for _, table := range []string{"1abc", "bad-name", "x`y", strings.Repeat("t", 54)} {
		_, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: table})
		if err == nil || !strings.Contains(err.Error(), "Config.Table") {
			t.Errorf("Table %q: err = %v, want an error naming Config.Table", table, err)
		}
	}
	if _, err := mysqlstore.New(context.Background(), nil, mysqlstore.Config{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := mysqlstore.Open(context.Background(), "not a dsn", mysqlstore.Config{}); err == nil {
		t.Error("Open with a bad DSN succeeded")
	}
}

func TestClosedStoreReturnsErrClosed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := f.st.Claim(ctx, claimParams("k", "a", t0)); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Claim: %v", err)
	}
	if _, err := f.st.Get(ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Get: %v", err)
	}
	if _, err := f.st.Sweep(ctx, idem.SweepParams{Now: t0}); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Sweep: %v", err)
	}
}

func TestNewDoesNotOwnThePool(t *testing.T) {
	db, _ := rawDB(t)
	table := testTable(t, db)
	st, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, st, claimParams("k", "a", t0))
	st.Close()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("Close of a New store closed the caller's pool: %v", err)
	}
}

func TestMissingSchemaIsAStoreError(t *testing.T) {
	db, _ := rawDB(t)
	st, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: testTable(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Claim(context.Background(), claimParams("k", "a", t0))
	var se *idem.StoreError
	if !errors.As(err, &se) || !errors.Is(err, idem.ErrStoreUnavailable) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("claim without schema: err = %v, want a StoreError that mentions Migrate", err)
	}
}

func TestMigrateConcurrentlyAndTwice(t *testing.T) {
	db, dsn := rawDB(t)
	table := testTable(t, db)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			st, err := mysqlstore.Open(ctx, dsn, mysqlstore.Config{Table: table, Migrate: true})
			if err == nil {
				err = st.Migrate(ctx) // and again: a no-op
				st.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + table + "_migrations`").Scan(&n); err != nil || n != 1 {
		t.Fatalf("migrations recorded = %d, %v; want 1", n, err)
	}
	assertPrimaryKey(t, db, table)
}

// assertPrimaryKey checks that the schema's unique constraint is really
// (scope, key), in that order.
func assertPrimaryKey(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	rows, err := db.Query("SELECT column_name FROM information_schema.statistics "+
		"WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' ORDER BY seq_in_index", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if got := strings.Join(cols, ","); got != "scope,key" {
		t.Fatalf("primary key of %s = (%s), want (scope,key)", table, got)
	}
}

func TestMigrationsScriptAppliesByHand(t *testing.T) {
	db, dsn := rawDB(t)
	table := testTable(t, db)
	script, err := mysqlstore.MigrationsScript(mysqlstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := sql.Open("mysql", withParam(dsn, "multiStatements=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	ctx := context.Background()
	for range 2 { // the script is re-runnable
		if _, err := multi.ExecContext(ctx, script); err != nil {
			t.Fatalf("applying MigrationsScript:\n%s\n%v", script, err)
		}
	}
	assertPrimaryKey(t, db, table)
	st, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	// Migrate finds the hand-applied migrations recorded and does nothing.
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, st, claimParams("k", "a", t0))

	if bad, err := mysqlstore.MigrationsScript(mysqlstore.Config{Table: "drop table x;"}); err == nil || bad != "" {
		t.Fatalf("MigrationsScript(invalid table) = %q, %v; want an error and no script", bad, err)
	}
}
