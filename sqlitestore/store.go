package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is an [idem.Store] backed by a SQLite file. It is safe for
// concurrent use, and several Stores (in one or several processes) may open
// the same file.
type Store struct {
	cfg     Config
	writer  *sql.DB
	readers *sql.DB
	// wq and rq run prepared statements on writer and readers.
	wq, rq *stmtCache
	closed atomic.Bool
	// migrations is the schema source; tests swap in a broken schema.
	migrations fs.FS
	// brokenClaim is set only by the constraint-evidence test
	// (export_test.go); nil in every real store.
	brokenClaim claimFunc
	// batch is the group-commit writer; nil when Config.Batch is off.
	batch *batcher
	// mix chooses between probing a reader before a claim (while
	// duplicates dominate) and going straight to the writer (while
	// first-time claims dominate, when the probe would only miss).
	mix claimmix.Mix
	// probes counts reader probes, for tests.
	probes atomic.Int64
}

var _ idem.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and, when
// cfg.Migrate is set, applies the embedded migrations. ctx bounds the
// connection set-up and migrations only.
//
// path is a file path: in-memory databases (":memory:") and "file:" URIs
// are refused, since the writer and the readers are separate connections
// that must share one file, and it may not contain '?'.
//
// There is no New over a caller's *sql.DB, as pgstore and mysqlstore have:
// the store owns its connections, one writer opened for BEGIN IMMEDIATE
// with the configured synchronous level, and a read-only pool, which a
// handle opened elsewhere cannot promise.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	return open(ctx, path, cfg, &Store{migrations: migrationFS})
}

// open finishes s, which carries the schema source (and, in tests only, a
// broken claim).
func open(ctx context.Context, path string, cfg Config, s *Store) (*Store, error) {
	cfg.path = path
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s.cfg = cfg
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	if cfg.Batch.On() {
		s.batch = newBatcher(s, cfg.Batch)
	}
	return s, nil
}

func (s *Store) connect(ctx context.Context) error {
	if err := createPrivate(s.cfg.path); err != nil {
		return err
	}
	w, err := sql.Open("sqlite", s.cfg.writerDSN())
	if err != nil {
		return fmt.Errorf("sqlitestore: open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The writer connects first: it switches the file to WAL, which the
	// query_only readers cannot do themselves.
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return fmt.Errorf("sqlitestore: open %s: %w", s.cfg.path, err)
	}
	r, err := sql.Open("sqlite", s.cfg.readerDSN())
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("sqlitestore: open readers: %w", err)
	}
	r.SetMaxOpenConns(s.cfg.ReadConns)
	r.SetMaxIdleConns(s.cfg.ReadConns)
	if err := r.PingContext(ctx); err != nil {
		_ = w.Close()
		_ = r.Close()
		return fmt.Errorf("sqlitestore: open readers on %s: %w", s.cfg.path, err)
	}
	s.writer, s.readers = w, r
	s.wq, s.rq = newStmtCache(w), newStmtCache(r)
	return nil
}

// DB returns the writer connection pool (one connection). Begin a
// transaction on it to use [Store.WithTx]; the transaction starts with
// BEGIN IMMEDIATE, so it holds the write lock until it ends, and this
// Store's other writes wait for it.
func (s *Store) DB() *sql.DB { return s.writer }

// Config returns the store's configuration with defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Path returns the database file the store was opened on.
func (s *Store) Path() string { return s.cfg.path }

// Close closes the connections. Later calls on s (and on transaction stores
// made from it) return [idem.ErrClosed]. Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.batch != nil {
		s.batch.stop()
	}
	return errors.Join(s.writer.Close(), s.readers.Close())
}

// ops returns the operations bound to the writer and the reader pool.
func (s *Store) ops() ops {
	return ops{read: s.rq, write: s.wq, replayCheck: true, mix: &s.mix, probes: &s.probes, brokenClaim: s.brokenClaim, batch: s.batch}
}

// Claim implements [idem.Store]. While recent claims were mostly
// duplicates, a replay is answered from a reader connection without
// touching the writer; while they were mostly first-time claims, a claim
// goes straight to the writer (a duplicate then writes nothing either).
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if s.closed.Load() {
		return idem.ClaimResult{}, idem.ErrClosed
	}
	r, err := s.ops().claim(ctx, p)
	return r, s.wrap("claim", err)
}

// Finish implements [idem.Store].
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if s.closed.Load() {
		return nil, idem.ErrClosed
	}
	r, err := s.ops().finish(ctx, p)
	return r, s.wrap("finish", err)
}

// Release implements [idem.Store].
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return s.wrap("release", s.ops().release(ctx, p))
}

// Heartbeat implements [idem.Store].
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return s.wrap("heartbeat", s.ops().heartbeat(ctx, p))
}

// Resolve implements [idem.Store].
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	if s.closed.Load() {
		return nil, idem.ErrClosed
	}
	r, err := s.ops().resolve(ctx, p)
	return r, s.wrap("resolve", err)
}

// SetMark implements [idem.Store].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return s.wrap("set mark", s.ops().setMark(ctx, scope, key, fence, mark))
}

// Get implements [idem.Store]; it reads on a reader connection.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if s.closed.Load() {
		return nil, idem.ErrClosed
	}
	r, err := s.ops().get(ctx, s.rq, scope, key)
	return r, s.wrap("get", err)
}

// List implements [idem.Store]; it reads on a reader connection.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if s.closed.Load() {
		return nil, idem.ErrClosed
	}
	r, err := s.ops().list(ctx, f)
	return r, s.wrap("list", err)
}

// Sweep implements [idem.Store] with one DELETE statement. p.Limit <= 0
// means no limit.
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if s.closed.Load() {
		return 0, idem.ErrClosed
	}
	n, err := s.ops().sweep(ctx, p)
	return n, s.wrap("sweep", err)
}

// wrap translates err at the boundary; a store closed during the call
// reports ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if err != nil && s.closed.Load() && isClosedErr(err) {
		return idem.ErrClosed
	}
	return translate(op, err)
}
