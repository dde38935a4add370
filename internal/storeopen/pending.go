package storeopen

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
)

// The PostgreSQL backend is wired here once package pgstore is part of the
// module.

func openPostgres(context.Context, DSN, Options) (idem.Store, error) {
	return nil, fmt.Errorf("%w: postgres (package pgstore not merged yet)", ErrNotAvailable)
}

func postgresMigrations(DSN) (string, error) {
	return "", fmt.Errorf("%w: postgres (package pgstore not merged yet)", ErrNotAvailable)
}
