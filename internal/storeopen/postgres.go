package storeopen

import (
	"context"
	"net/url"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// PostgreSQL DSN: postgres://user@host:5432/db?… as pgx accepts it, plus an
// optional schema parameter (default public) for the records table.

func openPostgres(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	dsn, schema := splitParam(d.Raw, "schema")
	return pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema, Migrate: opt.Migrate})
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
