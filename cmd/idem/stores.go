package main

import (
	"context"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// openExisting opens a store for the record commands: never creating a new
// database, never migrating, and never memory://, which starts empty in
// every process — a list of it would look like an empty store.
func openExisting(ctx context.Context, f *flags, dsn string) (idem.Store, int, bool) {
	d, err := storeopen.Parse(dsn)
	if err != nil {
		return nil, f.usageError("--store: %v", err), false
	}
	if d.Scheme == "memory" {
		return nil, f.usageError("--store: memory:// starts empty in every process, so it holds no records to read; name the store the proxy or application writes to"), false
	}
	st, err := storeopen.Open(ctx, dsn, storeopen.Options{MustExist: true})
	if err != nil {
		return nil, f.fail(err), false
	}
	return st, 0, true
}
