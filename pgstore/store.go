package pgstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

// Store is an [idem.Store] and [idem.Notifier] on PostgreSQL. It is safe for
// concurrent use. Its methods (Claim, Finish, Release, Heartbeat, Resolve,
// SetMark, Get, List, Sweep) behave exactly as documented on [idem.Store];
// each runs as one statement in its own implicit transaction, except where a
// method's doc says otherwise.
type Store struct {
	ops
	pool    *pgxpool.Pool
	ownPool bool // Open created the pool, so Close closes it
	cfg     Config
	names   names
	closed  atomic.Bool
	lis     *listener    // nil when notifications are disabled
	batch   *batcher     // nil when group commit is off
	mix     claimmix.Mix // picks Claim's cheaper path
	// minTTL is the shortest retention (ExpiresAt - CompletedAt, in
	// nanoseconds) of the outcomes this store has recorded, 0 before the
	// first: it bounds the sweep's walk (see Sweep).
	minTTL atomic.Int64
}

// noteTTL lowers minTTL to ttl.
func (s *Store) noteTTL(ttl time.Duration) {
	for {
		cur := s.minTTL.Load()
		if ttl <= 0 || (cur != 0 && cur <= int64(ttl)) || s.minTTL.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

var (
	_ idem.Store    = (*Store)(nil)
	_ idem.Notifier = (*Store)(nil)
	_ idem.Store    = txStore{}
)

// New returns a store that keeps records in cfg's table through pool. The
// caller keeps ownership of pool: [Store.Close] does not close it. With
// cfg.Migrate set it applies pending migrations first, under ctx. With
// cfg.ReplicatedClaims set, pool must have been built from a
// configuration prepared by [ConfigurePool]: New checks it, under ctx.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errNilPool
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, names: newNames(cfg.Schema, cfg.Table)}
	s.ops = ops{st: s, db: pgxQuerier{db: pool}, sql: buildStatements(s.names.table, !cfg.DisableNotify, cfg.ReplicatedClaims)}
	if !cfg.DisableNotify {
		s.lis = newListener(pool.Config().ConnConfig, channelName(cfg.Schema, cfg.Table))
	}
	if cfg.Migrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	if s.replicated() {
		if err := probeNotices(ctx, pool); err != nil {
			return nil, err
		}
	}
	if cfg.Batch.On() {
		s.batch = newBatcher(pool, cfg.Batch, s)
	}
	return s, nil
}

// Open connects a new pool to dsn (a PostgreSQL URL or keyword/value string,
// as accepted by pgxpool.ParseConfig) and returns a store that owns it:
// [Store.Close] closes the pool. The pool's configuration is prepared by
// [ConfigurePool]. A multi-host dsn with target_session_attrs=read-write
// (postgres://u@a:5432,b:5432/db?target_session_attrs=read-write) follows
// a failover: connections made after it go to the promoted server.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, wrap("open", err)
	}
	return OpenConfig(ctx, pcfg, cfg)
}

// OpenConfig is [Open] from a parsed pool configuration, for settings a
// DSN cannot carry: a pgx.QueryTracer (pcfg.ConnConfig.Tracer, e.g. for
// tracing or counting statements), hooks such as AfterConnect. It prepares
// pcfg with [ConfigurePool], connects a new pool and returns a store that
// owns it: [Store.Close] closes the pool. pcfg must come from
// pgxpool.ParseConfig (a nil pcfg is an error).
func OpenConfig(ctx context.Context, pcfg *pgxpool.Config, cfg Config) (*Store, error) {
	if pcfg == nil {
		return nil, errNilPoolConfig
	}
	ConfigurePool(pcfg)
	if cfg.CallTimeout >= 0 {
		// The server-side twin of the call bound, unless the DSN set one.
		d := cfg.CallTimeout
		if d == 0 {
			d = DefaultCallTimeout
		}
		if _, set := pcfg.ConnConfig.RuntimeParams["statement_timeout"]; !set {
			pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, wrap("open", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// Pool returns the pool the store runs on, for callers that begin their own
// transactions (see [Store.WithTx]).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Config returns the store's configuration with defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Close stops the notification listener and, for a store made by [Open],
// closes its pool. Later calls on the store, and on transaction twins made
// from it, return [idem.ErrClosed]. Close is idempotent.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if s.lis != nil {
		s.lis.stop()
	}
	if s.batch != nil {
		s.batch.stop()
	}
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// bound bounds one store call by Config.CallTimeout (see there); the
// caller's earlier deadline still wins. cancel must be called.
func (o ops) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := o.st.cfg.CallTimeout
	if d <= 0 {
		return ctx, func() {}
	}
	if o.st.cfg.ReplicatedClaims != "" && o.st.cfg.ReplicatedClaimTimeout > d {
		d = o.st.cfg.ReplicatedClaimTimeout
	}
	return context.WithTimeout(ctx, d)
}

// ops implements the record operations on one querier.
type ops struct {
	st  *Store
	db  querier
	sql statements
}

// batcher returns the group-commit batcher, or nil when writes run one by
// one: group commit is off, or the operations run in a caller's
// transaction (which commits when the caller says so).
func (o ops) batcher() *batcher {
	if o.db.inTx() {
		return nil
	}
	return o.st.batch
}

// finishBatcher returns the batcher for outcomes: nil unless
// Config.BatchFinishes is set (see there).
func (o ops) finishBatcher() *batcher {
	if !o.st.cfg.BatchFinishes {
		return nil
	}
	return o.batcher()
}

// Schema returns the PostgreSQL schema that holds the store's tables.
func (s *Store) Schema() string { return s.cfg.Schema }
