package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered, embedded schema change.
type migration struct {
	Version int
	Name    string // file name, e.g. "0001_records.sql"
	SQL     string // template; see render
}

// migrations returns the embedded migrations in version order. The file
// names are fixed at build time, so a malformed one is a programming error
// caught by the package's tests, not a runtime condition.
func migrations() []migration {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			panic("pgstore: migration file without a version number: " + base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms
}

// names holds the safely quoted identifiers derived from a Config.
type names struct {
	schema     string // "schema"
	table      string // "schema"."table"
	migrations string // "schema"."table_migrations"
	replacer   *strings.Replacer
}

func newNames(schema, table string) names {
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	return names{
		schema:     q(schema),
		table:      pgx.Identifier{schema, table}.Sanitize(),
		migrations: pgx.Identifier{schema, table + "_migrations"}.Sanitize(),
		replacer: strings.NewReplacer(
			"{{table}}", pgx.Identifier{schema, table}.Sanitize(),
			"{{pkey}}", q(table+"_pkey"),
			"{{state_check}}", q(table+"_state_check"),
			"{{fence_check}}", q(table+"_fence_check"),
			"{{list_idx}}", q(table+"_list_idx"),
			"{{sweep_idx}}", q(table+"_sweep_idx"),
		),
	}
}

func (n names) render(m migration) string { return n.replacer.Replace(m.SQL) }

func (n names) migrationsTableSQL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.migrations + ` (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
}

// MigrationsScript returns every migration for the records table of cfg
// (cfg.Schema and cfg.Table, defaulted and validated as [New] does; other
// fields are ignored) as one script, including the bookkeeping rows, for
// teams that apply schema changes with their own tool (`idem migrate
// --print`). A store later opened with Migrate set sees them as applied.
// An invalid Schema or Table is an error naming the field, and no script.
func MigrationsScript(cfg Config) (string, error) {
	cfg, err := Config{Schema: cfg.Schema, Table: cfg.Table}.withDefaults()
	if err != nil {
		return "", err
	}
	return migrationsScript(cfg), nil
}

// MigrationsSQL is [MigrationsScript] for the default table in schema
// (empty means "public"). It is kept, with its signature, for callers
// written before MigrationsScript; it has no error to return, so for an
// invalid schema the script it returns is a single SQL comment that names
// the problem and holds no statements. Prefer MigrationsScript, which
// returns that problem as an error.
func MigrationsSQL(schema string) string {
	script, err := MigrationsScript(Config{Schema: schema})
	if err != nil {
		return "-- " + err.Error() + "\n"
	}
	return script
}

func migrationsScript(cfg Config) string {
	n := newNames(cfg.Schema, cfg.Table)
	var b strings.Builder
	b.WriteString("-- idem PostgreSQL schema (pgstore)\nBEGIN;\n\n")
	b.WriteString("CREATE SCHEMA IF NOT EXISTS " + n.schema + ";\n\n")
	b.WriteString(n.migrationsTableSQL() + ";\n\n")
	for _, m := range migrations() {
		fmt.Fprintf(&b, "-- migration %s\n%s\n", m.Name, strings.TrimSpace(n.render(m)))
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, '%s');\n\n", n.migrations, m.Version, m.Name)
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}

// Migrate applies the embedded migrations that the database has not seen
// yet, in order, in one transaction. Processes that start together may all
// call it: a transaction-scoped advisory lock (keyed by the schema) lets one
// apply the migrations while the others wait and then find nothing to do.
// ctx governs the whole transaction, including the wait for the lock.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed("migrate")
	}
	if err := s.migrate(ctx); err != nil {
		return wrap("migrate", err)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey(s.cfg.Schema)); err != nil {
		return err
	}
	if err := ensureSchema(ctx, tx, s.cfg.Schema, s.names.schema); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, s.names.migrationsTableSQL()); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, tx, s.names.migrations)
	if err != nil {
		return err
	}
	for _, m := range migrations() {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, s.names.render(m)); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.names.migrations+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// ensureSchema creates the schema only when it is missing: CREATE SCHEMA IF
// NOT EXISTS still demands the CREATE privilege on the database, which a
// service account using "public" need not have.
func ensureSchema(ctx context.Context, tx pgx.Tx, schema, quoted string) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoted)
	return err
}

func appliedVersions(ctx context.Context, tx pgx.Tx, table string) (map[int]bool, error) {
	rows, err := tx.Query(ctx, "SELECT version FROM "+table)
	if err != nil {
		return nil, err
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	m := make(map[int]bool, len(vs))
	for _, v := range vs {
		m[int(v)] = true
	}
	return m, nil
}

// migrateLockKey is the advisory lock key for migrations in one schema. It is
// derived from the schema name so that every process computes the same key.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idem/pgstore/migrate:" + schema))
	return int64(h.Sum64())
}
