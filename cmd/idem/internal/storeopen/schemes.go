package storeopen

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// scheme is one backend: how to check a DSN, open it and print its schema.
type scheme struct {
	// check validates the DSN's shape without contacting anything.
	check func(d DSN) error
	// open opens the store.
	open func(ctx context.Context, d DSN, opt Options) (idem.Store, error)
	// migrationsSQL returns the schema script; nil for stores without one.
	migrationsSQL func(d DSN) (string, error)
	// provision creates what a store without SQL schema needs (a NATS
	// bucket) and describes it; nil for stores that need nothing.
	provision func(ctx context.Context, d DSN) (string, error)
}

// schemes is the table of known backends, one entry each.
var schemes = map[string]scheme{
	"memory":     {check: checkMemory, open: openMemory},
	"sqlite":     {check: checkSQLite, open: openSQLite, migrationsSQL: sqliteMigrations},
	"postgres":   {check: checkPostgres, open: openPostgres, migrationsSQL: postgresMigrations},
	"postgresql": {check: checkPostgres, open: openPostgres, migrationsSQL: postgresMigrations},
	// Redis keeps no schema: nothing to migrate.
	"redis":          {check: checkRedis, open: openRedis},
	"rediss":         {check: checkRedis, open: openRedis},
	"redis+cluster":  {check: checkRedis, open: openRedis},
	"redis+sentinel": {check: checkRedis, open: openRedis},
	"mysql":          {check: checkMySQL, open: openMySQL, migrationsSQL: mysqlMigrations},
	// DynamoDB's "schema" is its table and indexes; --print gives the
	// CreateTable request as JSON.
	"dynamodb": {check: checkDynamo, open: openDynamo, migrationsSQL: dynamoMigrations},
	// NATS keeps no schema; migrate creates the bucket.
	"nats": {check: checkNATS, open: openNATS, provision: provisionNATS},
}

func checkMemory(d DSN) error {
	if d.Target != "" {
		return fmt.Errorf("memory:// takes nothing after the scheme, got %q", d.Target)
	}
	return nil
}

func openMemory(context.Context, DSN, Options) (idem.Store, error) { return memstore.New(), nil }

func checkSQLite(d DSN) error {
	sd, err := parseSQLite(d.Target)
	if err != nil {
		return err
	}
	p := sd.path
	switch {
	case p == "":
		return errors.New("empty path; write sqlite://idem.db or sqlite:///abs/path.db")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		return fmt.Errorf("%q is not a file path; use memory:// for an in-memory store", p)
	case strings.ContainsRune(p, '#'):
		return fmt.Errorf("path %q contains '#'", p)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("path %q names a directory", p)
	}
	return nil
}
