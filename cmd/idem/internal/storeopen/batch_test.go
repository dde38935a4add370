package storeopen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/sqlitestore"
)

func TestSQLiteOptions(t *testing.T) {
	t.Parallel()
	good := map[string]sqliteDSN{
		// Group commit without a window unless batch= says otherwise.
		"a.db":                           {path: "a.db", batch: batchParams{eager: true}},
		"a.db?sync=normal":               {path: "a.db", sync: "normal", batch: batchParams{eager: true}},
		"a.db?batch_size=5":              {path: "a.db", batch: batchParams{eager: true, size: 5}},
		"a.db?batch=0":                   {path: "a.db"},
		"a.db?batch=2ms":                 {path: "a.db", batch: batchParams{window: 2 * time.Millisecond}},
		"/x/a.db?batch=1ms&batch_size=9": {path: "/x/a.db", batch: batchParams{window: time.Millisecond, size: 9}},
	}
	for in, want := range good {
		if got, err := parseSQLite(in); err != nil || got != want {
			t.Errorf("parseSQLite(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if _, err := Parse("sqlite://" + in); err != nil {
			t.Errorf("Parse(sqlite://%s): %v", in, err)
		}
	}
	for _, in := range []string{"a.db?mode=ro", "a.db?batch=fast", "a.db?batch=-1ms",
		"a.db?batch=1ms&batch_size=0", "a.db?batch=0&batch_size=5", "?batch=1ms", "a.db#x"} {
		if _, err := Parse("sqlite://" + in); err == nil {
			t.Errorf("Parse(sqlite://%s) succeeded, want error", in)
		}
	}
}

func TestSQLiteOpenPassesOptions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "b.db")
	st, err := Open(context.Background(), "sqlite://"+path+"?batch=3ms&batch_size=7&sync=normal", Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := st.(*sqlitestore.Store).Config()
	if st.(*sqlitestore.Store).Path() != path || cfg.Synchronous != "NORMAL" || cfg.Batch != (sqlitestore.Batch{Window: 3 * time.Millisecond, MaxSize: 7}) {
		t.Fatalf("config %+v", cfg)
	}
	if _, err := Open(context.Background(), "sqlite://"+path+"?batch=5s", Options{}); err == nil {
		t.Fatal("a 5s window was accepted")
	}
}

func TestPostgresBatchParams(t *testing.T) {
	t.Parallel()
	dsn, cfg, err := parsePostgres("postgres://u@h/db?sslmode=disable&batch=2ms&batch_size=64&schema=s")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dsn, "batch") || strings.Contains(dsn, "schema") || !strings.Contains(dsn, "sslmode=disable") {
		t.Errorf("pgx DSN %q", dsn)
	}
	if cfg.Schema != "s" || cfg.Batch.Window != 2*time.Millisecond || cfg.Batch.MaxSize != 64 || !cfg.BatchFinishes {
		t.Errorf("config %+v", cfg)
	}
	if _, err := Parse("postgres://u@h/db?batch=soon"); err == nil {
		t.Error("Parse accepted batch=soon")
	}
	dsn, cfg, err = parsePostgres("postgres://u@h/db?batch=1ms&batch_finish=true")
	if err != nil || !cfg.BatchFinishes || strings.Contains(dsn, "batch") {
		t.Errorf("batch_finish=true: %q %+v %v", dsn, cfg, err)
	}
	if _, cfg, err = parsePostgres("postgres://u@h/db?batch=1ms&batch_finish=false"); err != nil || cfg.BatchFinishes || !cfg.Batch.On() {
		t.Errorf("batch_finish=false: %+v %v", cfg, err)
	}
	for _, in := range []string{"postgres://u@h/db?batch=0&batch_finish=true", "postgres://u@h/db?batch=1ms&batch_finish=maybe"} {
		if _, _, err := parsePostgres(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

// TestPostgresBatchDefault: without batch=, a PostgreSQL store groups
// commits without a window (batch=eager); batch=0 turns group commit off.
func TestPostgresBatchDefault(t *testing.T) {
	t.Parallel()
	for in, eager := range map[string]bool{
		"postgres://u@h/db":                         true,
		"postgres://u@h/db?batch_size=16":           true,
		"postgres://u@h/db?batch_finish=true":       true,
		"postgres://u@h/db?batch=eager":             true,
		"postgres://u@h/db?batch=0":                 false,
		"postgres://u@h/db?batch=2ms&batch_size=64": false,
	} {
		dsn, cfg, err := parsePostgres(in)
		if err != nil || cfg.Batch.Eager != eager || strings.Contains(dsn, "batch") {
			t.Errorf("%s: pgx DSN %q, batch %+v, %v; want eager %v", in, dsn, cfg.Batch, err, eager)
		}
	}
	// pgstore's zero Batch is its default group commit: off is Unbatched.
	if _, cfg, _ := parsePostgres("postgres://u@h/db?batch=0"); cfg.Batch.On() || cfg.BatchFinishes || !cfg.Unbatched {
		t.Errorf("batch=0: group commit on (%+v, finishes %v, unbatched %v)", cfg.Batch, cfg.BatchFinishes, cfg.Unbatched)
	}
	for _, in := range []string{"postgres://u@h/db", "postgres://u@h/db?batch=eager", "postgres://u@h/db?batch=2ms"} {
		if _, cfg, _ := parsePostgres(in); cfg.Unbatched {
			t.Errorf("%s: Unbatched set", in)
		}
	}
	// Outcomes join the group commit by default.
	if _, cfg, _ := parsePostgres("postgres://u@h/db"); !cfg.BatchFinishes {
		t.Errorf("default: outcomes not batched (%+v)", cfg)
	}
}

// TestPostgresAsyncOutcomes: async_outcomes=true sets
// pgstore.Config.AsyncOutcomes and takes outcomes out of the group commit
// (claims keep it); with batch_finish=true, or a value that is not a
// boolean, the DSN is refused.
func TestPostgresAsyncOutcomes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"postgres://u@h/db":                                     false,
		"postgres://u@h/db?async_outcomes=false":                false,
		"postgres://u@h/db?async_outcomes=true":                 true,
		"postgres://u@h/db?async_outcomes=on&batch=0":           true,
		"postgres://u@h/db?async_outcomes=1&batch_finish=false": true,
	} {
		dsn, cfg, err := parsePostgres(in)
		if err != nil || cfg.AsyncOutcomes != want || strings.Contains(dsn, "async") {
			t.Errorf("%s: pgx DSN %q, %+v, %v; want AsyncOutcomes %v", in, dsn, cfg, err, want)
			continue
		}
		if want && cfg.BatchFinishes {
			t.Errorf("%s: outcomes batched with claims", in)
		}
		if want && !strings.Contains(in, "batch=0") && !cfg.Batch.On() {
			t.Errorf("%s: claims lost the group commit", in)
		}
	}
	for _, in := range []string{"postgres://u@h/db?async_outcomes=true&batch_finish=true", "postgres://u@h/db?async_outcomes=later"} {
		if _, _, err := parsePostgres(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}
