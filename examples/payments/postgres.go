package main

import (
	"context"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

func openPostgres(ctx context.Context, dsn string) (idem.Store, error) {
	return pgstore.Open(ctx, dsn, pgstore.Config{Migrate: true})
}
