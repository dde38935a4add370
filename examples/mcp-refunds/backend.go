package main

import (
	"context"
	"database/sql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// backend is the one SQLite file that holds idem's records (table
// idem_records, through sqlitestore) and the refunds ledger.
type backend struct {
	st *sqlitestore.Store
}

func openBackend(ctx context.Context, path string) (*backend, error) {
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Migrate: true})
	if err != nil {
		return nil, err
	}
	return &backend{st: st}, nil
}

// store is idem's record store.
func (b *backend) store() idem.Store { return b.st }

// db is the writer pool (one connection, synchronous=FULL) the ledger
// writes through, so a refund is as durable as the claim before it.
func (b *backend) db() *sql.DB { return b.st.DB() }

func (b *backend) Close() error { return b.st.Close() }
