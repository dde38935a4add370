package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// benchConcurrency is the number of concurrent clients in the benchmarks.
const benchConcurrency = 16

// runConcurrent runs fn from benchConcurrency goroutines.
func runConcurrent(b *testing.B, fn func(i int64)) {
	var n atomic.Int64
	b.SetParallelism((benchConcurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			fn(n.Add(1))
		}
	})
}

// rawFirst and rawReplay are the minimal statements a hand-written
// implementation would send: a plain INSERT and an UPDATE for a first-time
// request, a SELECT for a replay.
const (
	rawInsert = `INSERT INTO %s (scope, key, fingerprint, state, fence, attempt_id, intent, created_at, lease_until)
		VALUES ($1, $2, $3, 'p', 1, $4, $5, $6, $7)`
	rawUpdate = `UPDATE %s SET state = 's', result = $3, completed_at = $4, expires_at = $5 WHERE scope = $1 AND key = $2`
	rawSelect = `SELECT scope, key, fingerprint, state, fence, attempt_id, intent, result, mark, created_at, lease_until, completed_at, expires_at
		FROM %s WHERE scope = $1 AND key = $2`
)

func benchStore(b *testing.B, cfg ...pgstore.Config) (*pgstore.Store, *pgxpool.Pool) {
	s := newStore(b, append(cfg, pgstore.Config{})[0])
	return s, sharedPool()
}

// BenchmarkFirstTime compares a first-time request through the store (Claim
// then Finish) with the raw INSERT and UPDATE, in the same run and table.
func BenchmarkFirstTime(b *testing.B) {
	for _, notify := range []bool{true, false} {
		b.Run(map[bool]string{true: "idem", false: "idem-nonotify"}[notify], func(b *testing.B) {
			benchFirstIdem(b, pgstore.Config{DisableNotify: !notify})
		})
	}
	// "idem" is the zero Config: claims and outcomes in the eager group
	// commit, as the CLI runs it. Without group commit:
	b.Run("idem-unbatched", func(b *testing.B) {
		benchFirstIdem(b, pgstore.Config{Unbatched: true})
	})
	b.Run("raw", func(b *testing.B) {
		s, pool := benchStore(b)
		ins, upd := fmt.Sprintf(rawInsert, s.QuotedTable()), fmt.Sprintf(rawUpdate, s.QuotedTable())
		ctx := context.Background()
		runConcurrent(b, func(i int64) {
			p := claimParams(fmt.Sprint("first-", i), "a", t0)
			if _, err := pool.Exec(ctx, ins, p.Scope, p.Key, p.Fingerprint[:], pgstore.EncodeAttempt(p.AttemptID), p.Intent, p.Now, p.LeaseUntil); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, upd, p.Scope, p.Key, []byte("ok"), t0, t0.Add(time.Hour)); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func benchFirstIdem(b *testing.B, cfg pgstore.Config) {
	s, _ := benchStore(b, cfg)
	ctx := context.Background()
	runConcurrent(b, func(i int64) {
		c, err := s.Claim(ctx, claimParams(fmt.Sprint("first-", i), "a", t0))
		if err != nil || !c.Claimed {
			b.Fatal(err)
		}
		p := succeed(c, "ok", t0, time.Hour)
		p.Claim = c.Record // as the engine passes it
		if _, err := s.Finish(ctx, p); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkReplay compares a duplicate through Claim with a raw SELECT of
// the same record.
func BenchmarkReplay(b *testing.B) {
	const keys = 1000
	setup := func(b *testing.B) *pgstore.Store {
		s, _ := benchStore(b)
		for k := range keys {
			c := mustClaim(b, s, claimParams(fmt.Sprint("replay-", k), "a", t0))
			mustFinish(b, s, succeed(c, "ok", t0, time.Hour))
		}
		return s
	}
	b.Run("idem", func(b *testing.B) {
		s := setup(b)
		ctx := context.Background()
		runConcurrent(b, func(i int64) {
			c, err := s.Claim(ctx, claimParams(fmt.Sprint("replay-", i%keys), "b", t0))
			if err != nil || c.Claimed {
				b.Fatal(err)
			}
		})
	})
	b.Run("raw", func(b *testing.B) {
		s := setup(b)
		sel := fmt.Sprintf(rawSelect, s.QuotedTable())
		pool := sharedPool()
		ctx := context.Background()
		runConcurrent(b, func(i int64) {
			var r idem.Record
			var fp, attempt, mark []byte
			var state byte
			var created, lease, done, exp *time.Time
			err := pool.QueryRow(ctx, sel, "tenant-1", fmt.Sprint("replay-", i%keys)).Scan(&r.Scope, &r.Key, &fp, &state,
				&r.Fence, &attempt, &r.Intent, &r.Result, &mark, &created, &lease, &done, &exp)
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}
