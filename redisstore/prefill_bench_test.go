package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/internal/testenv/counts"
)

// prefillStore records n succeeded records with 200-byte results through
// s itself (Claim and Finish from 64 callers): the record layout is the
// store's own.
func prefillStore(b *testing.B, s *Store, n int64) {
	ctx := context.Background()
	result := []byte(strings.Repeat("x", 200))
	now := time.Now().UTC().Truncate(time.Microsecond)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				p := idem.ClaimParams{Scope: "pf", Key: "pf-" + strconv.FormatInt(i, 10), AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)}
				res, err := s.Claim(ctx, p)
				if err == nil {
					_, err = s.Finish(ctx, idem.FinishParams{Scope: "pf", Key: p.Key, Fence: res.Record.Fence, AttemptID: "a",
						State: idem.StateSucceeded, Result: result, CompletedAt: now, ExpiresAt: now.Add(24 * time.Hour), Claim: res.Record})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkClaimFinish is a first-time request through the store — Claim,
// then Finish with the claim — from 16 callers on a key space already
// holding prefill records (benchstat compares the sizes).
func BenchmarkClaimFinish(b *testing.B) {
	for _, n := range testenv.BenchPrefills(b) {
		b.Run("prefill="+counts.Label(n), func(b *testing.B) {
			s, _ := benchStore(b)
			prefillStore(b, s, n)
			ctx := context.Background()
			result := []byte(strings.Repeat("x", 200))
			setParallel(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					now := time.Now().UTC().Truncate(time.Microsecond)
					p := idem.ClaimParams{Scope: "b", Key: fmt.Sprint("f", benchSeq.Add(1)), AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)}
					res, err := s.Claim(ctx, p)
					if err != nil || !res.Claimed {
						b.Error(err)
						return
					}
					if _, err := s.Finish(ctx, idem.FinishParams{Scope: "b", Key: p.Key, Fence: res.Record.Fence, AttemptID: "a",
						State: idem.StateSucceeded, Result: result, CompletedAt: now, ExpiresAt: now.Add(time.Hour), Claim: res.Record}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
