package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
)

// prefillKey names prefilled record number i, on both sides.
func prefillKey(i int64) string { return "pf-" + strconv.FormatInt(i, 10) }

// prefillReplayKey picks the prefilled record request n replays: spread
// over all n records (a multiplicative hash), so replays read cold pages
// as a large table's callers would, not one hot thousand.
func prefillReplayKey(n, records int64) string {
	return prefillKey(int64((uint64(n) * 0x9E3779B97F4A7C15 >> 1) % uint64(records)))
}

// prefiller loads terminal records [from, to) into both sides of a target
// (idem's only, with spec.idemOnly), calling done with the number loaded so
// far on each side after each batch.
type prefiller func(ctx context.Context, st idem.Store, spec prefillSpec, from, to int64, payload []byte, done func(side string, n int64)) error

// prefillSpec says what records a prefill writes.
type prefillSpec struct {
	// expired records were created three days ago and expired an hour ago
	// (for the sweep); others expire a day from now.
	expired bool
	// idemOnly leaves the raw side empty.
	idemOnly bool
}

// times is prefillTimes for spec: base is prefillBase() when the loader was
// made.
func (spec prefillSpec) times(base time.Time, i int64) prefillRow {
	if !spec.expired {
		return prefillTimes(base, i)
	}
	c := base.Add(-48*time.Hour + time.Duration(i)*time.Microsecond)
	return prefillRow{created: c, lease: c.Add(30 * time.Second), completed: c, expires: base.Add(23 * time.Hour)}
}

// sides are the tables (or key spaces) spec writes, raw first.
func (spec prefillSpec) sides(raw, idemSide string) [][2]string {
	if spec.idemOnly {
		return [][2]string{{sideIdem, idemSide}}
	}
	return [][2]string{{sideRaw, raw}, {sideIdem, idemSide}}
}

// prefillBatch is how many records one COPY, multi-row INSERT or pipeline
// carries.
const prefillBatch = 20000

// prefillRow holds the column values of prefilled record i: succeeded,
// created i µs after base (so created_at order is key order), expiring a
// day after the run started.
type prefillRow struct {
	created, lease, completed, expires time.Time
}

func prefillTimes(base time.Time, i int64) prefillRow {
	c := base.Add(time.Duration(i) * time.Microsecond)
	return prefillRow{created: c, lease: c.Add(30 * time.Second), completed: c, expires: base.Add(48 * time.Hour)}
}

// prefillBase is when prefilled records were "created": a day before now,
// so that their expiry (a day after now) puts them all in the future.
func prefillBase() time.Time { return time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second) }

// postgresPrefill COPYs into both tables.
func postgresPrefill(pool *pgxpool.Pool, schema string) prefiller {
	base := prefillBase()
	cols := []string{"scope", "key", "fingerprint", "state", "fence", "attempt_id", "result", "mark",
		"created_at", "lease_until", "completed_at", "expires_at", "waiting"}
	return func(ctx context.Context, _ idem.Store, spec prefillSpec, from, to int64, payload []byte, done func(string, int64)) error {
		for _, side := range spec.sides("raw_records", "idem_records") {
			for lo := from; lo < to; lo += prefillBatch {
				hi := min(to, lo+prefillBatch)
				rows := make([][]any, 0, hi-lo)
				for i := lo; i < hi; i++ {
					t := spec.times(base, i)
					// A terminal record keeps no lease (pgstore clears it).
					rows = append(rows, []any{benchScope, prefillKey(i), benchFingerprint[:], "s", int64(1), pgBenchAttempt,
						payload, "", t.created, nil, t.completed, t.expires, false})
				}
				if _, err := pool.CopyFrom(ctx, pgx.Identifier{schema, side[1]}, cols, pgx.CopyFromRows(rows)); err != nil {
					return fmt.Errorf("COPY into %s: %w", side[1], err)
				}
				done(side[0], hi-from)
			}
		}
		// VACUUM sets the hint bits and the visibility map of the rows COPY
		// wrote, as autovacuum would on a table that has been serving:
		// otherwise the first read of every row dirties its page, and the
		// replay cells measure those writes. The CHECKPOINT (where the role
		// may run one) writes the loaded pages out before the cells, not
		// during them.
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+pgx.Identifier{schema, "raw_records"}.Sanitize()+", "+pgx.Identifier{schema, "idem_records"}.Sanitize()); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
			fmt.Fprintf(os.Stderr, "prefill: no checkpoint after loading (%v)\n", err)
		}
		var tables []string
		for _, side := range spec.sides("raw_records", "idem_records") {
			tables = append(tables, pgx.Identifier{schema, side[1]}.Sanitize())
		}
		postgresPrewarm(ctx, pool, schema, tables)
		return nil
	}
}

// postgresPrewarm reads tables and their indexes into shared_buffers with
// pg_prewarm, so that the cells measure a server that has been serving
// these records, not one that has just loaded them: COPY writes through a
// small ring of buffers and leaves almost nothing cached, and the first
// pass of replays over a cold table measures the OS instead. It is
// skipped, with a note on stderr, when the relations do not fit in
// shared_buffers (replays then read from the OS, as such a server would)
// or pg_prewarm is not installed. The extension, when missing, is created
// in the bench's scratch schema, so it goes when the schema is dropped.
func postgresPrewarm(ctx context.Context, pool *pgxpool.Pool, schema string, tables []string) {
	var size, buffers int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest($1::text[]) t)::bigint,
		(SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings WHERE name = 'shared_buffers')`,
		tables).Scan(&size, &buffers); err != nil {
		fmt.Fprintf(os.Stderr, "prefill: not prewarmed: %v\n", err)
		return
	}
	if size > buffers*9/10 {
		fmt.Fprintf(os.Stderr, "prefill: not prewarmed: %d MB of records and indexes do not fit in shared_buffers (%d MB)\n", size>>20, buffers>>20)
		return
	}
	var ns string
	err := pool.QueryRow(ctx, `SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_prewarm'`).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		ns = pgx.Identifier{schema}.Sanitize()
		_, err = pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_prewarm SCHEMA "+ns)
	}
	if err == nil {
		_, err = pool.Exec(ctx, `SELECT `+ns+`.pg_prewarm(c.oid) FROM pg_class c, unnest($1::text[]) t
			WHERE c.oid = t::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = t::regclass)`, tables)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "prefill: not prewarmed (pg_prewarm: %v)\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "prefill: prewarmed %d MB into shared_buffers (%d MB)\n", size>>20, buffers>>20)
}

// sqlPrefill runs multi-row INSERTs, a transaction per batch, into tables
// of the SQLite/MariaDB shape (times in unix microseconds). quote quotes an
// identifier.
func sqlPrefill(db *sql.DB, tables [2]string, quote func(string) string) prefiller {
	base := prefillBase()
	const perStmt = 500
	return func(ctx context.Context, _ idem.Store, spec prefillSpec, from, to int64, payload []byte, done func(string, int64)) error {
		for _, st := range spec.sides(tables[0], tables[1]) {
			side, table := st[0], st[1]
			head := "INSERT INTO " + quote(table) + " (scope, " + quote("key") + ", fingerprint, state, fence, attempt_id, result, mark, " +
				"created_at, lease_until, completed_at, expires_at) VALUES "
			for lo := from; lo < to; lo += prefillBatch {
				hi := min(to, lo+prefillBatch)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				for a := lo; a < hi; a += perStmt {
					b := min(hi, a+perStmt)
					var q strings.Builder
					q.WriteString(head)
					args := make([]any, 0, (b-a)*12)
					for i := a; i < b; i++ {
						if i > a {
							q.WriteString(",")
						}
						q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
						t := spec.times(base, i)
						args = append(args, benchScope, prefillKey(i), benchFingerprint[:], "succeeded", 1, benchAttempt, payload, "",
							t.created.UnixMicro(), t.lease.UnixMicro(), t.completed.UnixMicro(), t.expires.UnixMicro())
					}
					if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
						_ = tx.Rollback()
						return fmt.Errorf("INSERT into %s: %w", table, err)
					}
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				done(side, hi-from)
			}
		}
		return nil
	}
}

// storePrefill loads idem's side through the store itself — a claim and a
// finish a record, from 64 callers — and the raw side as its requests do,
// pipelined: the fast path for stores whose record layout is the store's
// own business (Redis).
func storePrefill(raw *redisRaw) prefiller {
	base := prefillBase()
	return func(ctx context.Context, s idem.Store, spec prefillSpec, from, to int64, payload []byte, done func(string, int64)) error {
		// Raw: SET NX + HSET, pipelined in batches.
		for lo := from; lo < to && !spec.idemOnly; lo += prefillBatch {
			hi := min(to, lo+prefillBatch)
			pipe := raw.c.Pipeline()
			for i := lo; i < hi; i++ {
				k := prefillKey(i)
				t := spec.times(base, i)
				pipe.SetNX(ctx, raw.prefix+k+":lock", benchAttempt, time.Hour)
				pipe.HSet(ctx, raw.prefix+k+":rec", "state", "succeeded", "fence", 1, "fp", benchFingerprint[:],
					"attempt", benchAttempt, "result", payload, "created", t.created.UnixMicro(),
					"completed", t.completed.UnixMicro(), "expires", t.expires.UnixMicro())
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			done(sideRaw, hi-from)
		}
		var next, loaded atomic.Int64
		next.Store(from)
		errs := make([]error, 64)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					done(sideIdem, loaded.Load())
				}
			}
		}()
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= to {
						return
					}
					t := spec.times(base, i)
					p := idem.ClaimParams{Scope: benchScope, Key: prefillKey(i), Fingerprint: idem.Fingerprint(benchFingerprint),
						AttemptID: benchAttempt, Now: t.created, LeaseUntil: t.lease}
					res, err := s.Claim(ctx, p)
					if err == nil && !res.Claimed {
						err = fmt.Errorf("prefill key %q exists", p.Key)
					}
					if err == nil {
						_, err = s.Finish(ctx, idem.FinishParams{Scope: benchScope, Key: p.Key, Fence: res.Record.Fence,
							AttemptID: benchAttempt, State: idem.StateSucceeded, Result: payload,
							CompletedAt: t.completed, ExpiresAt: t.expires, Claim: res.Record})
					}
					if err != nil {
						errs[g] = err
						return
					}
					loaded.Add(1)
				}
			}()
		}
		wg.Wait()
		close(stop)
		done(sideIdem, loaded.Load())
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return ctx.Err()
	}
}
