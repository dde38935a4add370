package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier = sqlcodec.Querier

// Store is an [idem.Store] backed by a MySQL or MariaDB table. It is safe
// for concurrent use. Use [Open] or [New] to create one.
type Store struct {
	db          *sql.DB
	q           querier // db, or the caller's transaction
	tx          *sql.Tx // non-nil for a store returned by WithTx
	table       string
	sql         statements
	owned       bool          // Close closes db (Open made it)
	multi       bool          // the pool allows several statements per query
	mix         *claimmix.Mix // shared with the WithTx views of this store
	migrate     bool          // Open applies migrations
	closed      *atomic.Bool  // shared with the WithTx views of this store
	callTimeout time.Duration // Config.CallTimeout; <= 0: none
}

// bound bounds one store call by Config.CallTimeout (see there); the
// caller's earlier deadline still wins. cancel must be called.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.callTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.callTimeout)
}

var _ idem.Store = (*Store)(nil)

// openIdleConns is the idle pool size of a store made by Open (capped by
// Config.MaxOpenConns).
const openIdleConns = 16

// Open connects to the MySQL or MariaDB server named by dsn (the
// go-sql-driver format, e.g. "user@tcp(127.0.0.1:3306)/db"), checks the
// connection and, if cfg.Migrate is set, applies the migrations. The store
// owns the connection pool: Close closes it.
//
// Open turns on the driver's interpolateParams option, so that each
// statement costs one round trip instead of a prepare and an execute; the
// store passes only integers and byte strings, which the driver escapes as
// binary literals. It also turns on multiStatements, so that Finish can
// write the outcome and read the record back in one round trip; every
// value still reaches the server escaped by the driver. Times are stored
// as integers, so parseTime and loc in the DSN do not matter. The pool
// opens at most [Config].MaxOpenConns connections (32 by default; callers
// beyond that wait for a free one instead of making the server refuse
// connections) and keeps up to 16 idle (database/sql keeps 2 by default,
// which makes a concurrent workload reconnect on almost every statement);
// for other pool settings, open the pool yourself and use [New].
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: dsn: %w", err)
	}
	mc.InterpolateParams = true
	mc.MultiStatements = true
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: dsn: %w", err)
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	idle := openIdleConns
	if cfg.MaxOpenConns > 0 {
		db.SetMaxOpenConns(cfg.MaxOpenConns)
		idle = min(idle, cfg.MaxOpenConns)
	}
	db.SetMaxIdleConns(idle)
	s, err := newStore(db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned, s.multi = true, true
	if err := s.start(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New returns a store that uses db, which must come from the
// go-sql-driver/mysql driver. The caller keeps ownership of db: Close does
// not close it. With cfg.Migrate set it applies pending migrations first,
// under ctx; otherwise it does not contact the server.
//
// For one round trip per statement, open db with interpolateParams=true.
// Other DSN options (clientFoundRows, parseTime, loc) do not change the
// store's behaviour.
func New(ctx context.Context, db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqlstore: New: db is nil")
	}
	s, err := newStore(db, cfg)
	if err != nil {
		return nil, err
	}
	if s.migrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newStore(db *sql.DB, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{db: db, q: db, table: cfg.Table, sql: buildStatements(cfg.Table), migrate: cfg.Migrate,
		closed: new(atomic.Bool), mix: new(claimmix.Mix), callTimeout: cfg.CallTimeout}, nil
}

// start checks the connection and applies migrations if configured.
func (s *Store) start(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return s.wrap("open", err)
	}
	if s.migrate {
		return s.Migrate(ctx)
	}
	return nil
}

// Close releases the store: later calls return [idem.ErrClosed]. It closes
// the connection pool only if [Open] created it. Close on a store returned
// by WithTx does nothing.
func (s *Store) Close() error {
	if s.tx != nil {
		return nil
	}
	if s.closed.Swap(true) {
		return nil
	}
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// usable reports ErrClosed once the store (or its parent) was closed.
func (s *Store) usable() error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return nil
}

// Table returns the name of the records table this store uses.
func (s *Store) Table() string { return s.table }
