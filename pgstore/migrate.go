package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/storekit/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order. The files
// are fixed at build time, so a malformed one is a programming error caught
// by the package's tests, not a runtime condition.
func migrations() []migration.Migration {
	ms, err := migration.Load("pgstore", migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
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
			"{{created_idx}}", q(table+"_created_idx"),
			"{{unknown_idx}}", q(table+"_unknown_idx"),
			"{{schema}}", q(schema),
			// 0003 copies the records into a new table and drops the old one
			// under this name; the literals name both for regclass and format.
			"{{v2_table}}", q(table+"_v2"),
			"{{v2_table_lit}}", literal(pgx.Identifier{schema, table + "_v2"}.Sanitize()),
			"{{table_lit}}", literal(pgx.Identifier{schema, table}.Sanitize()),
		),
	}
}

// literal quotes s as an SQL string constant (standard_conforming_strings,
// on by default since PostgreSQL 9.1: a backslash is an ordinary character).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (n names) render(m migration.Migration) string { return n.replacer.Replace(m.SQL) }

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

func migrationsScript(cfg Config) string {
	n := newNames(cfg.Schema, cfg.Table)
	var b strings.Builder
	b.WriteString("-- idem PostgreSQL schema (pgstore)\nBEGIN;\n\n")
	b.WriteString("CREATE SCHEMA IF NOT EXISTS " + n.schema + ";\n\n")
	b.WriteString(n.migrationsTableSQL() + ";\n\n")
	for _, m := range migrations() {
		fmt.Fprintf(&b, "-- migration %s\n%s\n", m.File, strings.TrimSpace(n.render(m)))
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, '%s');\n\n", n.migrations, m.Version, m.File)
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
	// A migration may copy a large table: the sessions' statement_timeout
	// (Config.CallTimeout) is not for it.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey(s.cfg.Schema)); err != nil {
		return err
	}
	if err := ensureSchema(ctx, tx, s.cfg.Schema, s.names.schema); err != nil {
		return err
	}
	if err := migration.Run(ctx, migrationTx{tx: tx, names: s.names}, migrations()); err != nil {
		return err
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

// migrationTx applies migrations in Migrate's transaction, under its lock.
type migrationTx struct {
	tx    pgx.Tx
	names names
}

func (t migrationTx) Applied(ctx context.Context) (map[int]bool, error) {
	if _, err := t.tx.Exec(ctx, t.names.migrationsTableSQL()); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, "SELECT version FROM "+t.names.migrations)
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

// Apply records m under its file name.
func (t migrationTx) Apply(ctx context.Context, m migration.Migration) error {
	if _, err := t.tx.Exec(ctx, t.names.render(m)); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, "INSERT INTO "+t.names.migrations+" (version, name) VALUES ($1, $2)", m.Version, m.File)
	return err
}

// migrateLockKey is the advisory lock key for migrations in one schema. It is
// derived from the schema name so that every process computes the same key.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idem/pgstore/migrate:" + schema))
	return int64(h.Sum64())
}
