package pgstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem/groupcommit"
	"github.com/idemkit/idem/storekit/commitqueue"
)

// Config configures a [Store]. The zero value is usable: it keeps records in
// public.idem_records, does not migrate, and wakes waiters with
// LISTEN/NOTIFY.
type Config struct {
	// Schema is the PostgreSQL schema that holds the records table and its
	// migrations table. Defaults to "public".
	Schema string

	// Table is the name of the records table. The migrations table is named
	// after it with the suffix "_migrations", and its constraints and indexes
	// take it as a prefix, so it may be at most 51 bytes long. Defaults to
	// "idem_records".
	Table string

	// Migrate applies pending migrations (see [Store.Migrate]) when the
	// store is constructed. Defaults to false: production deployments
	// usually run `idem migrate` (or their own tool, fed by
	// [MigrationsScript]) before the service starts.
	Migrate bool

	// DisableNotify turns off LISTEN/NOTIFY wake-ups: write statements no
	// longer call pg_notify and [Store.Subscribe] returns an error, so the
	// engine falls back to polling. Set it on CockroachDB and YugabyteDB,
	// which do not implement LISTEN/NOTIFY. Defaults to false (notify on).
	DisableNotify bool

	// Batch configures group commit: claims (and, with BatchFinishes,
	// outcomes) written by concurrent callers are gathered into batches,
	// written as transactions of at most four writes, each one pipelined
	// round trip (see the package documentation). A Batch with neither a
	// Window nor Eager — the zero Batch included — is the default: the
	// eager group commit (Eager, MaxSize honoured) with outcomes batched
	// too, whatever BatchFinishes says; a lone write still goes out on its
	// own, so one caller sees no batching. Unbatched turns group commit
	// off.
	Batch Batch

	// BatchFinishes also batches outcomes (Finish) under a Batch with a
	// Window or Eager set; there, by default, only claims are batched and
	// each outcome is its own statement and transaction. The default
	// group commit (above) batches outcomes already. Batched, a
	// first-time request shares both of its commits: idem bench measured
	// 1.37× and 1.77× the raw INSERT + UPDATE at 16 and 64 callers,
	// against 0.93× and 1.15× with claims only (docs/performance.md). The
	// cost is HOT updates: finishes batched together tend to update rows
	// that were claimed together, on one heap page, and within one
	// transaction PostgreSQL cannot prune the versions they replace, so
	// 92–97 % of them stay HOT instead of 97–99 % (transactions of at
	// most four writes; one transaction for a whole batch left 64–67 %),
	// and fewer (78 % measured) while other long transactions on the
	// server hold back pruning.
	// Defaults to false.
	BatchFinishes bool

	// Unbatched turns group commit off: every claim and every outcome is
	// its own statement and transaction, as it was by default before
	// 2026-12-04. Concurrent commits then share only what PostgreSQL
	// shares between them (one WAL flush for the commits waiting on it);
	// at 16 and 64 callers behind net/http that measured 0.83–0.94× the
	// closest peer against 1.13–1.60× with the default group commit
	// (docs/performance.md). Batch must then be zero and BatchFinishes
	// false. Defaults to false.
	Unbatched bool

	// ReplicatedClaims makes every claim durable on the synchronous
	// standbys before it is reported: the claim's transaction runs with
	// synchronous_commit at this level (SET LOCAL, whatever the server's
	// or the role's default), so a failover to a synchronous standby
	// keeps every claim whose effect ran. Outcome writes keep the
	// session's level. "on" waits until the standby has flushed the claim
	// to disk, "remote_apply" until it has also applied it (visible to
	// reads on the standby), "remote_write" only until the standby's
	// operating system has it (a crash of the standby's machine together
	// with the primary's loses it; CheckReplication warns). It has effect
	// only with synchronous_standby_names set on the primary. A claim whose
	// wait the standby does not end within ReplicatedClaimTimeout, or
	// whose wait is cancelled (the caller's ctx, an operator's
	// pg_cancel_backend), fails closed with an error matching
	// [ErrNotReplicated] and idem.ErrStoreUnavailable: its effect does not
	// run. A claim that finds its own earlier row (a retry after a lost
	// answer) first makes that row durable the same way. The pool must
	// pass PostgreSQL's warnings to pgstore (see [ConfigurePool]; [Open]
	// does it). Defaults to "": claims commit at the session's
	// synchronous_commit.
	ReplicatedClaims string

	// ReplicatedClaimTimeout bounds a claim's wait for the synchronous
	// standbys when ReplicatedClaims is set; past it the wait is
	// cancelled and the claim fails closed. Defaults to 5s.
	ReplicatedClaimTimeout time.Duration

	// AsyncOutcomes lets an outcome's commit return before PostgreSQL has
	// flushed it to disk: every Finish outside a caller's transaction sets
	// synchronous_commit to off for its own transaction (set_config with
	// is_local), and outcomes are never batched with claims, so a claim's
	// commit still waits for its flush (and for the standbys, with
	// ReplicatedClaims). The next durable commit on the server — another
	// request's claim — or the WAL writer, within three times
	// wal_writer_delay (600 ms by default), makes the outcome durable.
	//
	// The trade: if the PostgreSQL server crashes in that window, the
	// outcome is lost while the client already has its answer. The record
	// stays in_progress with its claim, and when its lease has run out a
	// retry of the key finds it unknown (DESIGN §12: only the outcome
	// write may be relaxed; a crash then leaves unknown, never a second
	// effect), for reconciliation to decide. A crash of the idem process
	// alone loses nothing: the server has the commit. At one caller this
	// saves one WAL flush a first-time request (1.16–1.68× idemlease
	// behind net/http, against 0.87–1.00× durable); from 16 callers the
	// default group commit shares the outcomes' flushes already and this
	// gains little or loses (docs/performance.md, "One caller on
	// PostgreSQL"). Defaults to false: every outcome is durable before
	// the caller is answered. BatchFinishes must then be false; the
	// default group commit batches only claims.
	AsyncOutcomes bool

	// CallTimeout bounds each store call — a claim, an outcome, a
	// release, a heartbeat, a decision, a mark, a read, a page of List (one
	// with a Limit), a batch of Sweep — from the moment it starts, whatever the caller's
	// context says (an earlier deadline of the caller's still wins): a
	// server that stops answering without closing the connection (paused,
	// or cut off by a partition that drops nothing) fails the call with a
	// timeout, which the engine reports as store unavailable (503) before
	// any effect runs, instead of holding the request for as long as TCP
	// keeps the connection. [Open] also sets it as the server-side
	// statement_timeout of the store's sessions, for a statement stuck on
	// a lock (migrations lift it for their transaction). A replicated
	// claim waits for the longer of this and ReplicatedClaimTimeout.
	// Negative: no bound. Defaults to 10s.
	CallTimeout time.Duration
}

// DefaultCallTimeout is Config.CallTimeout's default.
const DefaultCallTimeout = 10 * time.Second

// The levels Config.ReplicatedClaims accepts, besides "" (off).
const (
	ReplicatedOn          = "on"
	ReplicatedRemoteApply = "remote_apply"
	ReplicatedRemoteWrite = "remote_write"
)

// DefaultReplicatedClaimTimeout is Config.ReplicatedClaimTimeout's default.
const DefaultReplicatedClaimTimeout = 5 * time.Second

// Batch is [groupcommit.Config]: the window and batch size of group commit.
type Batch = groupcommit.Config

// Default names.
const (
	DefaultSchema = "public"
	DefaultTable  = "idem_records"
)

// maxTable leaves room for the longest derived name ("_state_check",
// "_fence_check") inside PostgreSQL's 63-byte identifier limit; longer names
// would be silently truncated by the server and could collide.
const (
	maxIdent = 63
	maxTable = maxIdent - len("_state_check")
)

// withDefaults returns c with defaults filled in, or an error naming the
// first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if err := checkIdent("Schema", c.Schema, maxIdent); err != nil {
		return c, err
	}
	if err := checkIdent("Table", c.Table, maxTable); err != nil {
		return c, err
	}
	switch c.ReplicatedClaims {
	case "", ReplicatedOn, ReplicatedRemoteApply, ReplicatedRemoteWrite:
	default:
		return c, fmt.Errorf("pgstore: Config.ReplicatedClaims %q is not a synchronous_commit level claims can wait at; use %q, %q, %q or \"\" (off)",
			c.ReplicatedClaims, ReplicatedOn, ReplicatedRemoteApply, ReplicatedRemoteWrite)
	}
	if c.ReplicatedClaimTimeout < 0 {
		return c, fmt.Errorf("pgstore: Config.ReplicatedClaimTimeout %s is negative", c.ReplicatedClaimTimeout)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.ReplicatedClaimTimeout == 0 {
		c.ReplicatedClaimTimeout = DefaultReplicatedClaimTimeout
	}
	switch {
	case c.Unbatched && (c.Batch != Batch{} || c.BatchFinishes):
		return c, errors.New("pgstore: Config.Unbatched turns group commit off; it takes no Batch settings and no BatchFinishes")
	case c.AsyncOutcomes && c.BatchFinishes:
		return c, errors.New("pgstore: Config.AsyncOutcomes takes no BatchFinishes: a batch is one transaction, and its claims must wait for the flush")
	case c.Unbatched:
		return c, nil
	case c.Batch.Window == 0 && !c.Batch.Eager:
		// The default: the eager group commit, outcomes included (claims
		// only with AsyncOutcomes).
		c.Batch.Eager = true
		c.BatchFinishes = !c.AsyncOutcomes
	}
	var err error
	c.Batch, err = commitqueue.Defaults("pgstore", c.Batch)
	return c, err
}

func checkIdent(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("pgstore: Config.%s %q is %d bytes long; at most %d are allowed", field, v, len(v), max)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("pgstore: Config.%s contains a NUL byte", field)
	}
	return nil
}
