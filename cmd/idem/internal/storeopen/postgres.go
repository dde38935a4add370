package storeopen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// PostgreSQL DSN: postgres://user@host:5432/db?… as pgx accepts it, plus
// optional parameters that idem reads and removes before pgx sees them:
// schema (default public) for the records table, batch / batch_size for
// group commit (see batch.go; on PostgreSQL the default is batch=eager,
// and batch=0 turns it off), batch_finish (pgstore.Config.BatchFinishes;
// true by default whenever group commit is on, false writes each outcome
// in a commit of its own), notify=false to turn off LISTEN/NOTIFY
// wake-ups (waiters poll instead): CockroachDB and YugabyteDB do not
// implement LISTEN/NOTIFY, and replicated_claims=on|remote_apply|
// remote_write (off by default) with replicated_claims_timeout=DURATION
// (5s) for pgstore.Config.ReplicatedClaims and ReplicatedClaimTimeout:
// each claim waits until the synchronous standbys have it, and fails
// closed (503) when they do not confirm it in time. A multi-host DSN with
// target_session_attrs=read-write
// (postgres://u@a:5432,b:5432/db?target_session_attrs=read-write) follows
// a failover to the promoted standby without a restart. call_timeout=DUR
// (10s; off for none) bounds every store call and is the sessions'
// statement_timeout (pgstore.Config.CallTimeout). async_outcomes=true
// (false by default; pgstore.Config.AsyncOutcomes) answers a request
// without waiting for its outcome's WAL flush: a PostgreSQL crash in the
// next fraction of a second leaves that record unknown (never a second
// effect); claims stay durable.

// PostgresParams are the DSN parameters idem reads for a PostgreSQL store
// and removes before pgx sees the DSN (pgx would send them to the server
// as settings, which refuses them).
var PostgresParams = append([]string{"schema", "notify", "batch_finish", "replicated_claims", "replicated_claims_timeout",
	"call_timeout", "async_outcomes"}, batchKeys...)

// parsePostgres removes idem's parameters from raw and returns the DSN for
// pgx and the store configuration. A query that does not parse is an
// error: dropping it would silently lose schema= (and print or migrate
// "public" instead).
func parsePostgres(raw string) (dsn string, cfg pgstore.Config, err error) {
	dsn, q, err := splitParams(raw, PostgresParams)
	if err != nil {
		return "", cfg, err
	}
	cfg.Schema = q.Get("schema")
	if v, ok := q["notify"]; ok {
		on, err := parseBool(v[0])
		if err != nil {
			return "", cfg, fmt.Errorf("notify=%q: %w", v[0], err)
		}
		cfg.DisableNotify = !on
	}
	if _, set := q["batch"]; !set {
		// Group commit without a window is PostgreSQL's default here: it
		// measured at least as fast as no batching at 1, 16 and 64 callers
		// and kept finishes HOT (docs/performance.md, "Group commit without
		// a window").
		q.Set("batch", "eager")
	}
	b, err := parseBatch(q)
	if err != nil {
		return "", cfg, err
	}
	cfg.Batch = pgstore.Batch{Window: b.window, Eager: b.eager, MaxSize: b.size}
	// batch=0: off (pgstore's zero Batch would be its default group commit).
	cfg.Unbatched = !cfg.Batch.On()
	// Outcomes share the claims' group commit unless batch_finish=false:
	// at 16 and 64 callers that measured 1.37× and 1.77× the raw
	// INSERT + UPDATE against 0.93× and 1.15× with each outcome its own
	// commit, 97 % of finishes still HOT (docs/performance.md, "Outcomes
	// in the group commit").
	cfg.BatchFinishes = b.window > 0 || b.eager
	if v, ok := q["batch_finish"]; ok {
		on, err := parseBool(v[0])
		if err != nil {
			return "", cfg, fmt.Errorf("batch_finish=%q: %w", v[0], err)
		}
		if on && b.window == 0 && !b.eager {
			return "", cfg, errors.New("batch_finish=true without batch=WINDOW or batch=eager: group commit is off")
		}
		cfg.BatchFinishes = on
	}
	if v, ok := q["async_outcomes"]; ok {
		on, err := parseBool(v[0])
		if err != nil {
			return "", cfg, fmt.Errorf("async_outcomes=%q: %w", v[0], err)
		}
		if on {
			if _, set := q["batch_finish"]; set && cfg.BatchFinishes {
				return "", cfg, errors.New("async_outcomes=true with batch_finish=true: a batch is one transaction, and its claims must wait for the flush")
			}
			// Outcomes then commit on their own; claims keep the group commit.
			cfg.AsyncOutcomes, cfg.BatchFinishes = true, false
		}
	}
	if err := parseReplicated(q, &cfg); err != nil {
		return "", cfg, err
	}
	if v, ok := q["call_timeout"]; ok {
		d, err := time.ParseDuration(v[0])
		switch {
		case v[0] == "off":
			cfg.CallTimeout = -1
		case err != nil || d <= 0:
			return "", cfg, fmt.Errorf("call_timeout=%q is not a positive duration such as 10s, or off", v[0])
		default:
			cfg.CallTimeout = d
		}
	}
	return dsn, cfg, nil
}

// parseReplicated reads replicated_claims and replicated_claims_timeout.
func parseReplicated(q url.Values, cfg *pgstore.Config) error {
	if v, ok := q["replicated_claims"]; ok {
		switch l := strings.ToLower(v[0]); l {
		case pgstore.ReplicatedRemoteApply, pgstore.ReplicatedRemoteWrite:
			cfg.ReplicatedClaims = l
		default:
			on, err := parseBool(l)
			if err != nil {
				return fmt.Errorf("replicated_claims=%q: write on, remote_apply, remote_write or off", v[0])
			}
			if on {
				cfg.ReplicatedClaims = pgstore.ReplicatedOn
			}
		}
	}
	if v, ok := q["replicated_claims_timeout"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return fmt.Errorf("replicated_claims_timeout=%q is not a positive duration such as 5s", v[0])
		}
		if cfg.ReplicatedClaims == "" {
			return errors.New("replicated_claims_timeout without replicated_claims=on: claims do not wait for the standbys")
		}
		cfg.ReplicatedClaimTimeout = d
	}
	return nil
}

// checkPostgres validates the DSN's shape and idem's parameters, schema
// included (as pgstore validates it), without contacting the server.
func checkPostgres(d DSN) error {
	if d.Target == "" {
		return errors.New("empty; write postgres://user@host:5432/db")
	}
	if _, err := url.Parse(d.Raw); err != nil {
		return fmt.Errorf("not a URL: %v", redactErr(err))
	}
	_, cfg, err := parsePostgres(d.Raw)
	if err != nil {
		return err
	}
	if _, err := pgstore.MigrationsScript(pgstore.Config{Schema: cfg.Schema}); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

func openPostgres(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	dsn, cfg, err := parsePostgres(d.Raw)
	if err != nil {
		return nil, err
	}
	cfg.Migrate = opt.Migrate
	if opt.PGTracer == nil {
		return pgstore.Open(ctx, dsn, cfg)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig.Tracer = opt.PGTracer
	return pgstore.OpenConfig(ctx, pcfg, cfg)
}

func postgresMigrations(d DSN) (string, error) {
	_, cfg, err := parsePostgres(d.Raw)
	if err != nil {
		return "", err
	}
	return pgstore.MigrationsScript(pgstore.Config{Schema: cfg.Schema})
}

// parseBool reads a boolean DSN parameter: true, false, 1, 0, t, f, yes,
// no, on or off, in any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "1", "t", "yes", "on":
		return true, nil
	case "false", "0", "f", "no", "off":
		return false, nil
	}
	return false, errors.New("not a boolean; write true or false")
}

// splitParams removes the named query parameters from a URL-shaped DSN and
// returns the rest and their values. A query that url.ParseQuery rejects
// (a ';', a bad %-escape) is an error; it names the problem but not the
// query, which may hold a password.
func splitParams(raw string, names []string) (rest string, values url.Values, err error) {
	values = url.Values{}
	i := strings.IndexByte(raw, '?')
	if i < 0 {
		return raw, values, nil
	}
	q, err := url.ParseQuery(raw[i+1:])
	if err != nil {
		return "", nil, fmt.Errorf("query: %w", err)
	}
	for _, n := range names {
		if v, ok := q[n]; ok {
			values[n] = v
			q.Del(n)
		}
	}
	rest = raw[:i]
	if len(q) > 0 {
		rest += "?" + q.Encode()
	}
	return rest, values, nil
}
