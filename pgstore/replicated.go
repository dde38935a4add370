package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
)

// Replicated claims (Config.ReplicatedClaims). A claim's statement sets
// synchronous_commit for its transaction (syncClause), so its commit waits
// until the synchronous standbys confirm it. PostgreSQL has committed the
// transaction locally before that wait, and when the wait is cancelled (a
// query cancel: the caller's ctx, a timeout, an operator's
// pg_cancel_backend) it reports success, with only a WARNING saying the
// commit "might not have been replicated". Trusting that success runs the
// effect on a claim a failover can lose; so every replicated claim runs on
// a connection of its own whose warnings pgstore sees (noticeHandler), and
// one whose wait was cancelled, or outlasted its bound, fails closed.

// ErrNotReplicated is matched (errors.Is) by the error of a claim that
// Config.ReplicatedClaims made wait for the synchronous standbys, when
// their confirmation did not come: the wait outlasted
// Config.ReplicatedClaimTimeout or the caller's context, or was cancelled.
// The claim may have committed on the primary, but it was not reported:
// its effect does not run. The error also matches idem.ErrNotDurable (the
// engine does not retry it: the wait had its bound) and, once the engine
// reports it, idem.ErrStoreUnavailable (a 503 in the idem CLI's proxy).
var ErrNotReplicated error = &idem.NotDurableError{Msg: "pgstore: the synchronous standbys did not confirm the claim"}

// probeMessage is the warning New raises to check that the pool passes
// warnings to noticeHandler.
const probeMessage = "pgstore: notice probe"

// noticeFlag is what noticeHandler recorded for a connection.
type noticeFlag uint8

const (
	noticeSyncRepCancelled noticeFlag = 1 << iota // a wait for the standbys was cancelled
	noticeProbe                                   // New's probe arrived
)

// notices holds the flags noticeHandler recorded, per connection, until
// the statement that caused them takes them.
var notices sync.Map // *pgconn.PgConn -> noticeFlag

// ConfigurePool prepares a pool configuration for a store with
// Config.ReplicatedClaims: its connections pass PostgreSQL's warnings to
// pgstore (any OnNotice handler already set is still called), so that a
// claim whose wait for the standbys was cancelled fails instead of being
// trusted. [Open] calls it; call it before pgxpool.NewWithConfig when you
// build the pool for [New]. New refuses ReplicatedClaims on a pool without
// it.
func ConfigurePool(cfg *pgxpool.Config) {
	prev := cfg.ConnConfig.OnNotice
	cfg.ConnConfig.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		noticeHandler(c, n)
		if prev != nil {
			prev(c, n)
		}
	}
	prevClose := cfg.BeforeClose
	cfg.BeforeClose = func(c *pgx.Conn) {
		notices.Delete(c.PgConn())
		if prevClose != nil {
			prevClose(c)
		}
	}
}

// noticeHandler records the warnings a replicated claim must see: the
// cancelled wait for synchronous replication (raised in the server
// function SyncRepWaitForLSN, whatever the language of its message) and
// New's probe.
func noticeHandler(c *pgconn.PgConn, n *pgconn.Notice) {
	var f noticeFlag
	switch {
	case n.Routine == "SyncRepWaitForLSN" || strings.Contains(n.Message, "wait for synchronous replication"):
		f = noticeSyncRepCancelled
	case n.Message == probeMessage:
		f = noticeProbe
	default:
		return
	}
	for {
		cur, loaded := notices.LoadOrStore(c, f)
		if !loaded || notices.CompareAndSwap(c, cur, cur.(noticeFlag)|f) {
			return
		}
	}
}

// takeNotices returns and clears the flags recorded for c.
func takeNotices(c *pgconn.PgConn) noticeFlag {
	if v, ok := notices.LoadAndDelete(c); ok {
		return v.(noticeFlag)
	}
	return 0
}

// probeNotices checks that the pool's connections pass warnings to
// noticeHandler (see ConfigurePool).
func probeNotices(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return wrap("new", err)
	}
	defer c.Release()
	takeNotices(c.Conn().PgConn())
	if _, err := c.Exec(ctx, `DO $$BEGIN PERFORM set_config('client_min_messages', 'warning', true); RAISE WARNING '`+probeMessage+`'; END$$`); err != nil {
		return wrap("new: probe the pool's notices", err)
	}
	if takeNotices(c.Conn().PgConn())&noticeProbe == 0 {
		return errors.New("pgstore: New: Config.ReplicatedClaims needs a pool that passes PostgreSQL's warnings to pgstore, to see a cancelled wait for the standbys: build its configuration with pgstore.ConfigurePool (or use pgstore.Open)")
	}
	return nil
}

// replicated reports whether claims wait for the standbys.
func (s *Store) replicated() bool { return s.cfg.ReplicatedClaims != "" }

// onSyncConn runs write, the statements of a replicated claim, on a
// connection of its own and checks that their commits were confirmed by
// the standbys. The wait is bounded by Config.ReplicatedClaimTimeout and
// by ctx: pgx ends a statement whose context ends (it closes the
// connection and sends the server a cancel request, which ends the
// backend's wait too). A write whose wait was cut short, by the bound or
// by anyone (PostgreSQL's warning), returns an error wrapping
// ErrNotReplicated (ctx's error when ctx ended), whatever the statement
// answered; its connection is closed, so that no late cancel request can
// reach the next statement on it.
func (s *Store) onSyncConn(ctx context.Context, write func(ctx context.Context, q querier) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pgc := c.Conn().PgConn()
	takeNotices(pgc)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ReplicatedClaimTimeout)
	err = write(wctx, pgxQuerier{db: c.Conn()})
	interrupted := wctx.Err() != nil
	cancel()
	cancelled := takeNotices(pgc)&noticeSyncRepCancelled != 0
	if interrupted || cancelled {
		closeConn(pgc)
	}
	c.Release()
	if ctx.Err() != nil && (interrupted || cancelled || err != nil) {
		return ctx.Err()
	}
	return s.syncFailure(interrupted, cancelled, err)
}

// closeConn closes a connection whose wait for the standbys was cut short.
func closeConn(pgc *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pgc.Close(ctx)
}

// syncFailure is the error of a replicated write that returned err, and
// whose wait for the standbys was interrupted by its bound or cancelled
// by someone else: err when neither happened.
func (s *Store) syncFailure(interrupted, cancelled bool, err error) error {
	var why string
	switch {
	case interrupted:
		why = fmt.Sprintf(" within %s (synchronous_commit=%s for claims): the wait was cut short", s.cfg.ReplicatedClaimTimeout, s.cfg.ReplicatedClaims)
	case cancelled:
		why = ": PostgreSQL cancelled the wait (a query cancel, e.g. pg_cancel_backend)"
	default:
		return err
	}
	why += "; the claim may have committed on the primary alone, and is not used"
	if err != nil {
		return fmt.Errorf("%w%s: %w", ErrNotReplicated, why, err)
	}
	return fmt.Errorf("%w%s", ErrNotReplicated, why)
}
