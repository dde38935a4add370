package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// PostgreSQL: idem's store gets schema=<scratch>, a schema of its own in
// the same database, and the raw table lives beside it in that schema; the
// schema is dropped at the end. The raw pool is built from the same DSN
// (pgstore.Open calls pgxpool.New with it), so pool settings such as
// pool_max_conns apply to both sides alike.
func openPostgresTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	pcfg, err := pgxpool.ParseConfig(pgDriverDSN(d.Raw))
	if err != nil {
		return nil, err
	}
	// Each side's connections carry the scratch name in their
	// application_name and count their statements, for the meter.
	rawStmts, idemStmts := &stmtCounter{}, &stmtCounter{}
	pcfg.ConnConfig.RuntimeParams["application_name"] = name + "_raw"
	pcfg.ConnConfig.Tracer = rawStmts
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create a scratch schema: %w", err)
	}
	level := pgReplicatedLevel(d.Raw)
	raw := &pgRaw{pool: pool, table: pgx.Identifier{name, "raw_records"}.Sanitize(), syncLevel: level}
	if err := raw.create(ctx); err != nil {
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		pool.Close()
		return nil, err
	}
	var syncCommit, fsync, version, syncNames string
	var syncStandbys int
	if err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync'), current_setting('server_version'),
		current_setting('synchronous_standby_names'), (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))`).
		Scan(&syncCommit, &fsync, &version, &syncNames, &syncStandbys); err != nil {
		syncCommit, fsync, version = "?", "?", "?"
	}
	durability := fmt.Sprintf("PostgreSQL %s, synchronous_commit=%s, fsync=%s", version, syncCommit, fsync)
	if syncNames != "" {
		durability += fmt.Sprintf(", synchronous_standby_names='%s' (%d connected)", syncNames, syncStandbys)
	}
	if level != "" {
		durability += ", claims (both sides) at synchronous_commit=" + level
	}
	m, err := newPGMeter(ctx, pgDriverDSN(d.Raw), name, rawStmts, idemStmts)
	if err != nil {
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		pool.Close()
		return nil, fmt.Errorf("connect the meter: %w", err)
	}
	cleanup := func(ctx context.Context) error {
		defer pool.Close()
		defer m.close()
		_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		return err
	}
	return &target{idemDSN: withQuery(withQuery(d.Raw, "schema", name), "application_name", name+"_idem"), raw: raw, cleanup: cleanup,
		meter: m, pgTracer: idemStmts,
		footprint: postgresFootprint(pool, name), prefill: postgresPrefill(pool, name),
		durability:     durability,
		durabilityNote: postgresDurabilityNote(syncCommit, fsync)}, nil
}

// pgDriverDSN drops idem's own parameters from a postgres:// URL.
func pgDriverDSN(raw string) string {
	base, q, ok := strings.Cut(raw, "?")
	if !ok {
		return raw
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return raw
	}
	for _, p := range storeopen.PostgresParams { // idem's store reads them, the raw pool must not get them
		vals.Del(p)
	}
	if len(vals) == 0 {
		return base
	}
	return base + "?" + vals.Encode()
}

// pgReplicatedLevel is the level a DSN's replicated_claims asks claims to
// wait at ("" when off). The DSN was validated by storeopen.
func pgReplicatedLevel(raw string) string {
	_, q, _ := strings.Cut(raw, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		return ""
	}
	switch v := strings.ToLower(vals.Get("replicated_claims")); v {
	case "remote_apply", "remote_write":
		return v
	case "on", "true", "1", "t", "yes":
		return "on"
	}
	return ""
}

type pgRaw struct {
	pool  *pgxpool.Pool
	table string
	// syncLevel, with replicated_claims, is the synchronous_commit level
	// the raw insert commits at, as idem's claims do: set in the same
	// statement (set_config(…, true) is SET LOCAL), the fewest round
	// trips a hand-written replicated claim can take.
	syncLevel string
}

func (p *pgRaw) create(ctx context.Context) error {
	// No CHECK constraints, as pgstore's table since its migration 0004
	// (PostgreSQL plans them in every INSERT and UPDATE, ~15 µs of server
	// CPU a request). The columns, their types and order are pgstore's (migration 0003),
	// so that bytes a record compare like with like.
	_, err := p.pool.Exec(ctx, `CREATE TABLE `+p.table+` (
		fence bigint NOT NULL, created_at timestamptz NOT NULL, lease_until timestamptz,
		completed_at timestamptz, expires_at timestamptz,
		state "char" NOT NULL, waiting boolean NOT NULL DEFAULT false,
		is_unknown boolean GENERATED ALWAYS AS (state = 'u') STORED,
		scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, fingerprint bytea NOT NULL,
		attempt_id bytea NOT NULL, mark text NOT NULL DEFAULT '', intent bytea, result bytea,
		PRIMARY KEY (scope, key)) WITH (fillfactor = 90)`)
	if err == nil {
		// The same secondary indexes as pgstore's schema (migration 0002):
		// every write pays them, and neither stops a HOT update.
		_, err = p.pool.Exec(ctx, `CREATE INDEX ON `+p.table+` (created_at)`)
	}
	if err == nil {
		_, err = p.pool.Exec(ctx, `CREATE INDEX ON `+p.table+` (created_at) WHERE is_unknown`)
	}
	if err != nil {
		return fmt.Errorf("create the raw table: %w", err)
	}
	return nil
}

func (p *pgRaw) insert(ctx context.Context, key string) (bool, error) {
	now := time.Now()
	sql := `INSERT INTO ` + p.table + ` (scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		VALUES ($1, $2, $3, 'p', 1, $4, $5, $6) ON CONFLICT DO NOTHING`
	if p.syncLevel != "" {
		sql = `INSERT INTO ` + p.table + ` (scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		SELECT $1, $2, $3, 'p', 1, $4, $5, $6 WHERE set_config('synchronous_commit', '` + p.syncLevel + `', true) IS NOT NULL
		ON CONFLICT DO NOTHING`
	}
	tag, err := p.pool.Exec(ctx, sql, benchScope, key, benchFingerprint[:], pgBenchAttempt, now, now.Add(30*time.Second))
	return tag.RowsAffected() == 1, err
}

func (p *pgRaw) update(ctx context.Context, key string, result []byte) error {
	now := time.Now()
	_, err := p.pool.Exec(ctx, `UPDATE `+p.table+` SET state = 's', result = $1, completed_at = $2, expires_at = $3,
		lease_until = NULL WHERE scope = $4 AND key = $5`, result, now, now.Add(time.Hour), benchScope, key)
	return err
}

func (p *pgRaw) read(ctx context.Context, key string) (bool, error) {
	var (
		scope, k, mark              string
		state                       byte
		fp, attempt, intent, result []byte
		fence                       int64
		created                     time.Time
		lease, completed, expires   *time.Time
	)
	err := p.pool.QueryRow(ctx, `SELECT scope, key, fingerprint, state, fence, attempt_id, intent, result, mark,
		created_at, lease_until, completed_at, expires_at FROM `+p.table+` WHERE scope = $1 AND key = $2`, benchScope, key).
		Scan(&scope, &k, &fp, &state, &fence, &attempt, &intent, &result, &mark, &created, &lease, &completed, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// close leaves the pool to cleanup, which still needs it.
func (p *pgRaw) close() error { return nil }
