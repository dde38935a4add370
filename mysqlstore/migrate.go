package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

const migrationsSuffix = "_migrations"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered, embedded schema step. Its file name is
// NNNN_name.sql; "{{table}}" in the text stands for the records table.
type migration struct {
	version int
	name    string
	text    string
}

// migrations are parsed once; a malformed embedded file is a build bug,
// caught by the package tests.
var migrations, migrationsErr = loadMigrations()

func loadMigrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("mysqlstore: migration file %q is not named NNNN_name.sql", f)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, text: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("mysqlstore: migrations are not numbered 1..n: found %d at position %d", m.version, i+1)
		}
	}
	return ms, nil
}

// statements splits a migration into statements for the table. Statements
// end with ";" at the end of a line; "--" comment lines are dropped.
func (m migration) statements(table string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(m.text, "\n") {
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
		fmt.Fprintf(&b, "\n-- migration %d: %s\n", m.version, m.name)
		for _, s := range m.statements(table) {
			b.WriteString(s + ";\n")
		}
		fmt.Fprintf(&b, "INSERT INTO `%s%s` (version, name) VALUES (%d, '%s') ON DUPLICATE KEY UPDATE version = version;\n",
			table, migrationsSuffix, m.version, m.name)
	}
	return b.String(), nil
}

// MigrationsSQL is [MigrationsScript] for table (empty means
// [DefaultTable]), kept with its signature for callers written before
// MigrationsScript. It has no error to return: if table is not a valid
// name, the script is a single SQL comment that says why, with no
// statements. Prefer MigrationsScript, which returns that as an error.
func MigrationsSQL(table string) string {
	script, err := MigrationsScript(Config{Table: table})
	if err != nil {
		return "-- " + err.Error() + "\n"
	}
	return script
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
	if _, err := conn.ExecContext(ctx, migrationsTableSQL(s.table)); err != nil {
		return s.wrap("migrate", err)
	}
	applied, err := s.appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if applied[m.version] {
			continue
		}
		for _, stmt := range m.statements(s.table) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("mysqlstore: migration %d (%s): %w", m.version, m.name, s.wrap("migrate", err))
			}
		}
		if _, err := conn.ExecContext(ctx, recordMigrationSQL(s.table), m.version, m.name); err != nil {
			return s.wrap("migrate", err)
		}
	}
	return nil
}

func (s *Store) appliedVersions(ctx context.Context, conn *sql.Conn) (map[int]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version FROM `"+s.table+migrationsSuffix+"`")
	if err != nil {
		return nil, s.wrap("migrate", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, s.wrap("migrate", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("migrate", err)
	}
	return applied, nil
}
