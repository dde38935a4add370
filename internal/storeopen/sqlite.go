package storeopen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func openSQLite(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	if opt.MustExist {
		if _, err := os.Stat(d.Target); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database file %q (create one with `idem migrate --store %s`)", d.Target, d.Raw)
		}
	}
	return sqlitestore.Open(ctx, sqlitestore.Config{Path: d.Target, Migrate: opt.Migrate})
}

func sqliteMigrations(DSN) (string, error) { return sqlitestore.MigrationsSQL(), nil }
