package sqlitestore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
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
// at 64 clients on Synchronous FULL: raw INSERT + UPDATE (two commits),
// the store without batching, and the store with group commit.
func BenchmarkGroupCommit(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		s := benchStore(b, "FULL")
		ctx := context.Background()
		ins, upd := prepareRaw(b, s)
		runTimed(b, func(i int64) error {
			p := claimParams("first-"+strconv.FormatInt(i, 10), "att")
			if _, err := ins.ExecContext(ctx, p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, p.Intent,
				p.Now.UnixMicro(), p.LeaseUntil.UnixMicro()); err != nil {
				return err
			}
			_, err := upd.ExecContext(ctx, []byte("ok"), t0.UnixMicro(), t0.Add(time.Hour).UnixMicro(), p.Scope, p.Key)
			return err
		})
	})
	for _, bt := range []Batch{{}, {Window: 2 * time.Millisecond, MaxSize: 128}} {
		b.Run(fmt.Sprintf("idem/batch=%s", bt.Window), func(b *testing.B) {
			s, err := Open(context.Background(), tempPath(b), Config{Migrate: true, Batch: bt})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			runTimed(b, func(i int64) error {
				p := claimParams("first-"+strconv.FormatInt(i, 10), "att")
				r, err := s.Claim(ctx, p)
				if err != nil {
					return err
				}
				_, err = s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: r.Record.Fence,
					AttemptID: p.AttemptID, State: idem.StateSucceeded, Result: []byte("ok"),
					CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				return err
			})
		})
	}
}
