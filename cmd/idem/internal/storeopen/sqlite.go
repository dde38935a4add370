package storeopen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// SQLite DSN: sqlite://PATH[?batch=eager&batch_size=64&sync=normal].
// sync is the synchronous level: full (the default: a claim survives power
// loss before its effect runs), normal (faster; a power cut may lose the
// last commits, and with them a claim whose effect ran) or extra. batch is
// group commit as on PostgreSQL (batch.go): eager by default — a lone
// caller writes as without it, callers arriving together share one
// transaction and its fsync (idem bench, first-time: 0.93× raw for one
// caller, 3.0× at 16 and 5.5× at 64, docs/performance.md) — and batch=0
// turns it off. No other option is accepted.

// sqliteDSN is a parsed sqlite:// target.
type sqliteDSN struct {
	path  string
	sync  string
	batch batchParams
}

func parseSQLite(target string) (sqliteDSN, error) {
	path, rawQuery, _ := strings.Cut(target, "?")
	d := sqliteDSN{path: path}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return d, fmt.Errorf("options %q: %w", rawQuery, err)
	}
	for k := range q {
		if k != "sync" && k != "batch" && k != "batch_size" {
			return d, fmt.Errorf("unknown option %q; accepted: sync, batch, batch_size", k)
		}
	}
	if _, set := q["batch"]; !set {
		q.Set("batch", "eager")
	}
	d.sync = q.Get("sync")
	d.batch, err = parseBatch(q)
	return d, err
}

func openSQLite(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	sd, err := parseSQLite(d.Target)
	if err != nil {
		return nil, err
	}
	if opt.MustExist {
		if _, err := os.Stat(sd.path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database file %q (create one with `idem migrate --store %s`)", sd.path, d.Raw)
		}
	}
	return sqlitestore.Open(ctx, sd.path, sqlitestore.Config{
		Migrate: opt.Migrate, Synchronous: sd.sync,
		Batch: sqlitestore.Batch{Window: sd.batch.window, Eager: sd.batch.eager, MaxSize: sd.batch.size},
	})
}

func sqliteMigrations(DSN) (string, error) { return sqlitestore.MigrationsScript(sqlitestore.Config{}) }
