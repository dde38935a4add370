package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	_ "modernc.org/sqlite" // the ledger's SQLite driver
)

// backend holds the SQLite database and idem's store.
//
// Interim: idem's records are kept in memory until the SQLite store is
// available; the ledger is already in SQLite.
type backend struct {
	store idem.Store
	db    *sql.DB
}

func openBackend(ctx context.Context, path string) (*backend, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &backend{store: memstore.New(), db: db}, nil
}

func (b *backend) Close() error { return errors.Join(b.db.Close()) }
