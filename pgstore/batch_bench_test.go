package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/pgstore"
)

// groupClients is the concurrency of the group-commit benchmarks.
const groupClients = 64

// runTimed runs op b.N times across groupClients goroutines and reports
// the 99th percentile latency of one op in ms.
func runTimed(b *testing.B, op func(i int64) error) {
	var (
		n   atomic.Int64
		mu  sync.Mutex
		all []time.Duration
	)
	b.SetParallelism((groupClients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkGroupCommit compares first-time requests (claim, then finish)
// at 64 clients over the shared 16-connection pool: raw INSERT + UPDATE
// (one implicit transaction each), the store without batching, and the
// store with group commit.
func BenchmarkGroupCommit(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		s, pool := benchStore(b)
		ins, upd := fmt.Sprintf(rawInsert, s.QuotedTable()), fmt.Sprintf(rawUpdate, s.QuotedTable())
		ctx := context.Background()
		runTimed(b, func(i int64) error {
			p := claimParams(fmt.Sprint("first-", i), "a", t0)
			if _, err := pool.Exec(ctx, ins, p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, p.Intent, p.Now, p.LeaseUntil); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, upd, p.Scope, p.Key, []byte("ok"), t0, t0.Add(time.Hour))
			return err
		})
	})
	for _, bt := range []pgstore.Batch{{}, {Window: 2 * time.Millisecond, MaxSize: 128}} {
		b.Run(fmt.Sprintf("idem/batch=%s", bt.Window), func(b *testing.B) {
			s, _ := benchStore(b, pgstore.Config{Batch: bt})
			ctx := context.Background()
			runTimed(b, func(i int64) error {
				c, err := s.Claim(ctx, claimParams(fmt.Sprint("first-", i), "a", t0))
				if err != nil {
					return err
				}
				_, err = s.Finish(ctx, succeed(c, "ok", t0, time.Hour))
				return err
			})
		})
	}
}
