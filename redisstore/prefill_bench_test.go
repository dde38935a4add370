package redisstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// benchPrefills are the table sizes BenchmarkClaimFinish runs at: none and
// 10k by default; IDEM_BENCH_PREFILL lists others ("0,10k,1M"), which take
// minutes to load.
func benchPrefills(b *testing.B) []int64 {
	env := os.Getenv("IDEM_BENCH_PREFILL")
	if env == "" {
		return []int64{0, 10_000}
	}
	var out []int64
	for _, p := range strings.Split(env, ",") {
		p = strings.TrimSpace(p)
		mult := int64(1)
		switch {
		case strings.HasSuffix(p, "k"):
			mult, p = 1000, strings.TrimSuffix(p, "k")
		case strings.HasSuffix(p, "M"):
			mult, p = 1_000_000, strings.TrimSuffix(p, "M")
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			b.Fatalf("IDEM_BENCH_PREFILL: %q is not a size such as 10k or 1M", p)
		}
		out = append(out, n*mult)
	}
	return out
}

func sizeLabel(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprint(n/1_000_000, "M")
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprint(n/1000, "k")
	}
	return fmt.Sprint(n)
}

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
	for _, n := range benchPrefills(b) {
		b.Run("prefill="+sizeLabel(n), func(b *testing.B) {
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
