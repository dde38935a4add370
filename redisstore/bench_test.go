package redisstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Benchmarks compare the store with the raw client doing the minimal
// equivalent commands, at 16 concurrent callers (IDEM_BENCH_PAR=N for N):
//   - first: idem Claim (one script) + Finish (one script) vs raw SET NX + HSET;
//   - replay: idem Claim on a finished key vs raw GET.
// TestBenchRatio (IDEM_BENCH=1) runs both in the same process and logs the ratios.

const benchParallel = 16

var benchSeq atomic.Int64

func setParallel(b *testing.B) {
	par := benchParallel
	if v, err := strconv.Atoi(os.Getenv("IDEM_BENCH_PAR")); err == nil {
		par = v
	}
	b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
}

func benchFirstIdem(b *testing.B, s *Store) {
	ctx := context.Background()
	setParallel(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := benchSeq.Add(1)
			now := time.Now().UTC().Truncate(time.Microsecond)
			p := idem.ClaimParams{Scope: "b", Key: fmt.Sprint("f", n), AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute), Intent: []byte("{}")}
			res, err := s.Claim(ctx, p)
			if err != nil || !res.Claimed {
				b.Fatal(err)
			}
			if _, err := s.Finish(ctx, idem.FinishParams{Scope: "b", Key: p.Key, Fence: res.Record.Fence, AttemptID: "a",
				State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchFirstRaw(b *testing.B, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	setParallel(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Sprint(prefix, ":raw:{f", benchSeq.Add(1), "}")
			if ok, err := c.SetNX(ctx, k+":lock", "a", time.Hour).Result(); err != nil || !ok {
				b.Fatal(err)
			}
			if err := c.HSet(ctx, k+":rec", "st", "succeeded", "r", "ok").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchReplayIdem(b *testing.B, s *Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := idem.ClaimParams{Scope: "b", Key: "replay", AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)}
	res, err := s.Claim(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	if res.Claimed {
		_, _ = s.Finish(ctx, idem.FinishParams{Scope: "b", Key: "replay", Fence: res.Record.Fence, AttemptID: "a",
			State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)})
	}
	p.AttemptID = "dup"
	setParallel(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := s.Claim(ctx, p); err != nil || res.Claimed {
				b.Fatal(err)
			}
		}
	})
}

func benchReplayRaw(b *testing.B, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	k := prefix + ":raw:replay"
	c.Set(ctx, k, "ok", time.Hour)
	setParallel(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Get(ctx, k).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchStore(b testing.TB) (*Store, redis.UniversalClient) {
	c := standaloneClient(b)
	return newStoreOn(b, c, Config{}), c
}

func BenchmarkFirstIdem(b *testing.B) { s, _ := benchStore(b); benchFirstIdem(b, s) }

// BenchmarkFirstIdemUnpipelined is BenchmarkFirstIdem with every command
// sent alone (Config.Unpipelined).
func BenchmarkFirstIdemUnpipelined(b *testing.B) {
	benchFirstIdem(b, newStoreOn(b, standaloneClient(b), Config{Unpipelined: true}))
}

func BenchmarkFirstRaw(b *testing.B)   { s, c := benchStore(b); benchFirstRaw(b, c, s.prefix) }
func BenchmarkReplayIdem(b *testing.B) { s, _ := benchStore(b); benchReplayIdem(b, s) }
func BenchmarkReplayRaw(b *testing.B)  { s, c := benchStore(b); benchReplayRaw(b, c, s.prefix) }

// TestBenchRatio runs idem and the raw client in the same process, on the
// same server, and logs idem's cost as a ratio of the raw floor. It
// measures; it asserts nothing about speed. Set IDEM_BENCH=1 to run it.
func TestBenchRatio(t *testing.T) {
	if os.Getenv("IDEM_BENCH") != "1" {
		t.Skip("set IDEM_BENCH=1 to measure idem against the raw client")
	}
	s, c := benchStore(t)
	pairs := []struct {
		name      string
		idem, raw func(*testing.B)
	}{
		{"first (claim+finish vs SET NX+HSET)", func(b *testing.B) { benchFirstIdem(b, s) }, func(b *testing.B) { benchFirstRaw(b, c, s.prefix) }},
		{"replay (claim vs GET)", func(b *testing.B) { benchReplayIdem(b, s) }, func(b *testing.B) { benchReplayRaw(b, c, s.prefix) }},
	}
	for _, p := range pairs {
		ri, rr := testing.Benchmark(p.idem), testing.Benchmark(p.raw)
		ni, nr := float64(ri.NsPerOp()), float64(rr.NsPerOp())
		t.Logf("%s at %d callers: idem %.1f µs/op (%.0f/s), raw %.1f µs/op (%.0f/s), ratio %.2fx",
			p.name, benchParallel, ni/1e3, 1e9/ni, nr/1e3, 1e9/nr, ni/nr)
	}
}
