package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations loads the embedded migrations (or, in tests, another set).
func migrations(fsys fs.FS) ([]migration.Migration, error) {
	return migration.Load("sqlitestore", fsys, "migrations/*.sql")
}

// recordedName is the name idem_migrations keeps for m: its file name
// without ".sql".
func recordedName(m migration.Migration) string { return strings.TrimSuffix(m.File, ".sql") }

// MigrationsScript returns every embedded migration in order, each headed
// by its file name, as one transaction for teams that apply schemas with
// their own tool (printed by `idem migrate --print`; `sqlite3 idem.db <
// script` applies it). Like [Store.Migrate], the script creates
// idem_migrations and records each version in it, so a store opened
// afterwards with Migrate set, or `idem migrate`, finds nothing to do. The
// error reports malformed embedded migrations, a build defect. cfg is
// unused: the SQLite schema has no names to configure (the parameter keeps
// the SQL stores' MigrationsScript alike).
func MigrationsScript(cfg Config) (string, error) {
	ms, err := migrations(migrationFS)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("-- idem SQLite schema (sqlitestore)\nBEGIN IMMEDIATE;\n\n")
	b.WriteString(migrationsTableSQL + ";\n\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "-- %s\n%s\n", m.File, strings.TrimSpace(m.SQL))
		// applied_at in unix microseconds, as Migrate writes it.
		fmt.Fprintf(&b, "INSERT INTO idem_migrations (version, name, applied_at) VALUES (%d, '%s', CAST(strftime('%%s', 'now') AS INTEGER) * 1000000);\n\n",
			m.Version, strings.ReplaceAll(recordedName(m), "'", "''"))
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
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
	ms, err := migrations(s.migrations)
	if err != nil {
		return err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := migration.Run(ctx, migrationTx{tx}, ms); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return nil
}

// migrationTx applies migrations in Migrate's IMMEDIATE transaction.
type migrationTx struct{ tx *sql.Tx }

func (t migrationTx) Applied(ctx context.Context) (map[int]bool, error) {
	if _, err := t.tx.ExecContext(ctx, migrationsTableSQL); err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT version FROM idem_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}

func (t migrationTx) Apply(ctx context.Context, m migration.Migration) error {
	if _, err := t.tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO idem_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, recordedName(m), time.Now().UnixMicro())
	return err
}
