package sqlitestore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// TestMigrationsScriptThenMigrate applies the printed script the way an
// external tool would (`sqlite3 idem.db < script`), then shows Migrate
// finds every version recorded and writes nothing: print-then-migrate is a
// no-op.
func TestMigrationsScriptThenMigrate(t *testing.T) {
	ctx := context.Background()
	script, err := MigrationsScript(Config{})
	if err != nil {
		t.Fatal(err)
	}
	path := tempPath(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, script); err != nil {
		db.Close()
		t.Fatalf("apply printed script: %v\n%s", err, script)
	}
	before := migrationRows(t, db)
	db.Close()
	if len(before) == 0 {
		t.Fatalf("the script recorded no migrations:\n%s", script)
	}

	s, err := Open(ctx, path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	version := observer(t, path)
	v0, c0 := version(), totalChanges(t, s)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after the printed script: %v", err)
	}
	if v1, c1 := version(), totalChanges(t, s); v1 != v0 || c1 != c0 {
		t.Errorf("Migrate after the printed script wrote: data_version %d → %d, total_changes %d → %d", v0, v1, c0, c1)
	}
	if after := migrationRows(t, s.DB()); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("idem_migrations changed:\nbefore %q\nafter  %q", before, after)
	}
	// Every embedded migration is recorded under the name Migrate uses.
	ms, err := migrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(ms) {
		t.Errorf("script recorded %d migrations, want %d", len(before), len(ms))
	}
	mustClaim(t, s, claimParams("k", "a"))
}

// migrationRows returns idem_migrations as "version name applied_at" lines.
func migrationRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT version || ' ' || name || ' ' || applied_at FROM idem_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
