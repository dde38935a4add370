package storeopen

import (
	"context"
	"net/url"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// PostgreSQL DSN: postgres://user@host:5432/db?… as pgx accepts it, plus
// optional parameters that idem reads and removes before pgx sees them:
// schema (default public) for the records table, and batch / batch_size
// for group commit (see batch.go).

// parsePostgres removes idem's parameters from raw and returns the DSN for
// pgx and the store configuration.
func parsePostgres(raw string) (dsn string, cfg pgstore.Config, err error) {
	dsn, cfg.Schema = splitParam(raw, "schema")
	q := url.Values{}
	for _, k := range batchKeys {
		var v string
		if dsn, v = splitParam(dsn, k); v != "" {
			q.Set(k, v)
		}
	}
	b, err := parseBatch(q)
	cfg.Batch = pgstore.Batch{Window: b.window, MaxSize: b.size}
	return dsn, cfg, err
}

func openPostgres(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	dsn, cfg, err := parsePostgres(d.Raw)
	if err != nil {
		return nil, err
	}
	cfg.Migrate = opt.Migrate
	return pgstore.Open(ctx, dsn, cfg)
}

func postgresMigrations(d DSN) (string, error) {
	_, schema := splitParam(d.Raw, "schema")
	if schema == "" {
		schema = pgstore.DefaultSchema
	}
	return pgstore.MigrationsSQL(schema), nil
}

// splitParam removes query parameter name from a URL-shaped DSN and
// returns the rest and the parameter's value.
func splitParam(raw, name string) (rest, value string) {
	i := strings.IndexByte(raw, '?')
	if i < 0 {
		return raw, ""
	}
	q, err := url.ParseQuery(raw[i+1:])
	if err != nil {
		return raw, ""
	}
	value = q.Get(name)
	q.Del(name)
	rest = raw[:i]
	if len(q) > 0 {
		rest += "?" + q.Encode()
	}
	return rest, value
}
