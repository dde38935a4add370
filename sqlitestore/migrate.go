package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema step, migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("sqlitestore: migration %s: name must start with a positive number and '_'", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// MigrationsScript returns every embedded migration in order, each headed
// by its file name, as one transaction for teams that apply schemas with
// their own tool (printed by `idem migrate --print`; `sqlite3 idem.db <
// script` applies it). Like [Store.Migrate], the script creates
// idem_migrations and records each version in it, so a store opened
// afterwards with Migrate set, or `idem migrate`, finds nothing to do. The
// error reports malformed embedded migrations, a build defect.
func MigrationsScript() (string, error) {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("-- idem SQLite schema (sqlitestore)\nBEGIN IMMEDIATE;\n\n")
	b.WriteString(migrationsTableSQL + ";\n\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "-- %s.sql\n%s\n", m.name, strings.TrimSpace(m.sql))
		// applied_at in unix microseconds, as Migrate writes it.
		fmt.Fprintf(&b, "INSERT INTO idem_migrations (version, name, applied_at) VALUES (%d, '%s', CAST(strftime('%%s', 'now') AS INTEGER) * 1000000);\n\n",
			m.version, strings.ReplaceAll(m.name, "'", "''"))
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}

// MigrationsSQL is [MigrationsScript] without the error, kept with its
// signature for callers written before MigrationsScript. Its error can only
// come from malformed embedded migrations; MigrationsSQL then returns a
// script that is a single SQL comment naming the problem, with no
// statements. Prefer MigrationsScript.
func MigrationsSQL() string {
	script, err := MigrationsScript()
	if err != nil {
		return "-- " + err.Error() + "\n"
	}
	return script
}

// migrationsTableSQL creates the table that records applied versions.
const migrationsTableSQL = `CREATE TABLE IF NOT EXISTS idem_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`

// Migrate applies the embedded migrations that the database has not seen,
// in one IMMEDIATE transaction, so processes migrating the same file at once
// apply each step exactly once. ctx bounds the whole run.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlitestore: migrate: %w", idem.ErrClosed)
	}
	ms, err := loadMigrations(s.migrations)
	if err != nil {
		return err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, migrationsTableSQL); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	for _, m := range ms {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idem_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
			return fmt.Errorf("sqlitestore: migrate %s: %w", m.name, err)
		}
		if n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("sqlitestore: migrate %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idem_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("sqlitestore: migrate %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return nil
}
