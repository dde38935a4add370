package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem/storekit/migration"
)

const migrationsSuffix = "_migrations"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are parsed once; a malformed embedded file is a build bug,
// caught by the package tests. "{{table}}" in their text stands for the
// records table.
var migrations, migrationsErr = migration.Load("mysqlstore", migrationFS, "migrations/*.sql")

// migrationStatements splits migration m into statements for the table. Statements
// end with ";" at the end of a line; "--" comment lines are dropped.
func migrationStatements(m migration.Migration, table string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(m.SQL, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], "{{table}}", table)
	}
	return out
}

func migrationsTableSQL(table string) string {
	return "CREATE TABLE IF NOT EXISTS `" + table + migrationsSuffix + "` (\n" +
		"  version    INT          NOT NULL PRIMARY KEY,\n" +
		"  name       VARCHAR(255) NOT NULL,\n" +
		"  applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)\n" +
		") ENGINE=InnoDB"
}

func recordMigrationSQL(table string) string {
	return "INSERT INTO `" + table + migrationsSuffix + "` (version, name) VALUES (?, ?)"
}

// MigrationsScript returns every migration for the records table of cfg
// (cfg.Table, defaulted and validated as [New] does; other fields are
// ignored) as one SQL script, including the bookkeeping rows of the
// migrations table, for `idem migrate --print` and for operators who apply
// schemas by hand. The script is re-runnable, and a store migrated by it
// finds nothing to do in [Store.Migrate]. An invalid Table is an error
// naming the field, and no script.
func MigrationsScript(cfg Config) (string, error) {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	if err := validateTable(table); err != nil {
		return "", err
	}
	if migrationsErr != nil {
		return "", migrationsErr
	}
	var b strings.Builder
	b.WriteString(migrationsTableSQL(table) + ";\n")
	for _, m := range migrations {
		fmt.Fprintf(&b, "\n-- migration %d: %s\n", m.Version, m.Name)
		for _, s := range migrationStatements(m, table) {
			b.WriteString(s + ";\n")
		}
		fmt.Fprintf(&b, "INSERT INTO `%s%s` (version, name) VALUES (%d, '%s') ON DUPLICATE KEY UPDATE version = version;\n",
			table, migrationsSuffix, m.Version, m.Name)
	}
	return b.String(), nil
}

// migrateLockWait bounds how long Migrate waits for another process that
// is migrating the same table.
const migrateLockWait = 60 * time.Second

// Migrate applies the embedded migrations that the database lacks. It is
// safe when several processes start at once: they serialise on a named
// server lock (GET_LOCK) for this database and table, and each migration is
// recorded in the migrations table after it ran. MySQL commits DDL
// implicitly, so every migration is written to be re-runnable (CREATE …
// IF NOT EXISTS) in case a process dies between a migration and its record.
// Migrate refuses to run on a store bound to a transaction ([Store.WithTx]).
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.tx != nil {
		return errors.New("mysqlstore: Migrate cannot run inside a transaction (MySQL commits DDL implicitly)")
	}
	if migrationsErr != nil {
		return migrationsErr
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	defer conn.Close()
	lock, err := s.takeMigrateLock(ctx, conn)
	if err != nil {
		return err
	}
	defer releaseLock(conn, lock)
	return s.applyMigrations(ctx, conn)
}

func (s *Store) takeMigrateLock(ctx context.Context, conn *sql.Conn) (string, error) {
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return "", s.wrap("migrate", err)
	}
	if !dbName.Valid {
		return "", errors.New("mysqlstore: migrate: the connection has no default database; name one in the DSN")
	}
	// Lock names are server-wide and at most 64 characters: hash the
	// qualified table name.
	sum := sha256.Sum256([]byte(dbName.String + "." + s.table))
	lock := "idem_migrate_" + hex.EncodeToString(sum[:12])
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, int(migrateLockWait/time.Second)).Scan(&got)
	if err != nil {
		return "", s.wrap("migrate", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return "", fmt.Errorf("mysqlstore: migrate: another process held the migration lock for %s", migrateLockWait)
	}
	return lock, nil
}

func releaseLock(conn *sql.Conn, lock string) {
	// Run even if the caller's context ended: a held lock would block every
	// other migrator until this connection closes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", lock)
}

func (s *Store) applyMigrations(ctx context.Context, conn *sql.Conn) error {
	if err := migration.Run(ctx, migrationConn{s: s, conn: conn}, migrations); err != nil {
		return fmt.Errorf("mysqlstore: %w", err)
	}
	return nil
}

// migrationConn applies migrations on Migrate's connection, under its lock.
// MySQL commits DDL implicitly: each statement stands alone.
type migrationConn struct {
	s    *Store
	conn *sql.Conn
}

func (c migrationConn) Applied(ctx context.Context) (map[int]bool, error) {
	if _, err := c.conn.ExecContext(ctx, migrationsTableSQL(c.s.table)); err != nil {
		return nil, c.s.wrap("migrate", err)
	}
	rows, err := c.conn.QueryContext(ctx, "SELECT version FROM `"+c.s.table+migrationsSuffix+"`")
	if err != nil {
		return nil, c.s.wrap("migrate", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, c.s.wrap("migrate", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, c.s.wrap("migrate", err)
	}
	return applied, nil
}

// Apply records m under the name after its number.
func (c migrationConn) Apply(ctx context.Context, m migration.Migration) error {
	for _, stmt := range migrationStatements(m, c.s.table) {
		if _, err := c.conn.ExecContext(ctx, stmt); err != nil {
			return c.s.wrap("migrate", err)
		}
	}
	if _, err := c.conn.ExecContext(ctx, recordMigrationSQL(c.s.table), m.Version, m.Name); err != nil {
		return c.s.wrap("migrate", err)
	}
	return nil
}
