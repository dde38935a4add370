package storeopen

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
)

// The SQLite and PostgreSQL backends are wired here once their packages
// are part of the module.

func openSQLite(context.Context, DSN, Options) (idem.Store, error) {
	return nil, fmt.Errorf("%w: sqlite (package sqlitestore not merged yet)", ErrNotAvailable)
}

func sqliteMigrations(DSN) (string, error) {
	return "", fmt.Errorf("%w: sqlite (package sqlitestore not merged yet)", ErrNotAvailable)
}

func openPostgres(context.Context, DSN, Options) (idem.Store, error) {
	return nil, fmt.Errorf("%w: postgres (package pgstore not merged yet)", ErrNotAvailable)
}

func postgresMigrations(DSN) (string, error) {
	return "", fmt.Errorf("%w: postgres (package pgstore not merged yet)", ErrNotAvailable)
}
