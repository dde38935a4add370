package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/mysqlstore"
)

// The benchmarks compare the store with the raw driver executing the
// minimal statements of the same operation, on the same pool and server:
//
//	ClaimNew        store Claim of a fresh key      vs  INSERT
//	ClaimDuplicate  store Claim of an existing key  vs  SELECT by primary key
//	Finish          store Finish                    vs  conditional UPDATE
//	FirstRequest    Claim + Finish                  vs  INSERT + UPDATE
//
// Each client alternates one raw operation and one store operation and
// times both, so the two are measured in the same moments under the same
// load (a shared machine's fsync latency drifts by several times within a
// minute; back-to-back runs would compare the drift, not the code). Metrics:
// raw-µs/op and idem-µs/op (mean latency of each), idem/raw (their ratio),
// at 1 and 16 concurrent clients.
//
// Run: go test -run '^$' -bench . -benchtime 2000x ./mysqlstore/

type benchEnv struct {
	db    *sql.DB
	st    *mysqlstore.Store
	table string
	seq   atomic.Int64
}

// newBenchEnv opens the store as an application would (Open, its own
// pool), and gives the raw side a pool with as many idle connections.
func newBenchEnv(b *testing.B) *benchEnv {
	db := sharedPool(b) // interpolateParams, as Open sets
	db.SetMaxIdleConns(16)
	dsn := testenv.MySQL.Need(b)
	table := testTable(b, db)
	st, err := mysqlstore.Open(context.Background(), dsn, mysqlstore.Config{Table: table, Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return &benchEnv{db: db, st: st, table: table}
}

func (e *benchEnv) key() string { return fmt.Sprintf("bench:%d", e.seq.Add(1)) }

// paired runs raw and idem alternately from `clients` goroutines and
// reports the latency of each and their ratio.
func paired(b *testing.B, clients int, raw, idemOp func(ctx context.Context) error) {
	procs := runtime.GOMAXPROCS(0)
	if clients < procs {
		// SetParallelism cannot go below GOMAXPROCS goroutines.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(clients))
	}
	b.SetParallelism(max(1, clients/procs))
	var rawNs, idemNs atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			for _, step := range []struct {
				op  func(context.Context) error
				sum *atomic.Int64
			}{{raw, &rawNs}, {idemOp, &idemNs}} {
				start := time.Now()
				if err := step.op(ctx); err != nil {
					b.Error(err)
					return
				}
				step.sum.Add(int64(time.Since(start)))
			}
		}
	})
	n := float64(b.N)
	b.ReportMetric(float64(rawNs.Load())/n/1e3, "raw-µs/op")
	b.ReportMetric(float64(idemNs.Load())/n/1e3, "idem-µs/op")
	b.ReportMetric(float64(idemNs.Load())/float64(rawNs.Load()), "idem/raw")
}

func forClients(b *testing.B, fn func(b *testing.B, clients int)) {
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) { fn(b, c) })
	}
}

var benchNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func benchClaim(key, attempt string) idem.ClaimParams {
	return idem.ClaimParams{Scope: "bench", Key: key, Fingerprint: fp(key), AttemptID: attempt,
		Intent: []byte(`{"op":"charge","amount":500}`), Now: benchNow, LeaseUntil: benchNow.Add(time.Minute)}
}

// raw statements: what the store does, minus its decisions.
func (e *benchEnv) rawInsert(ctx context.Context, p idem.ClaimParams) error {
	_, err := e.db.ExecContext(ctx, "INSERT INTO `"+e.table+"` (scope, `key`, fingerprint, state, fence, attempt_id, intent, "+
		"created_at, lease_until) VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?, ?)",
		p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, p.Intent, p.Now.UnixMicro(), p.LeaseUntil.UnixMicro())
	return err
}

func (e *benchEnv) rawUpdate(ctx context.Context, key, attempt string) error {
	_, err := e.db.ExecContext(ctx, "UPDATE `"+e.table+"` SET state = 'succeeded', result = ?, completed_at = ?, expires_at = ? "+
		"WHERE scope = 'bench' AND `key` = ? AND fence = 1 AND attempt_id = ? AND state = 'in_progress'",
		[]byte("ok"), benchNow.UnixMicro(), benchNow.Add(time.Hour).UnixMicro(), key, attempt)
	return err
}

func (e *benchEnv) rawSelect(ctx context.Context, key string) error {
	var n int64
	return e.db.QueryRowContext(ctx, "SELECT fence FROM `"+e.table+"` WHERE scope = 'bench' AND `key` = ?", key).Scan(&n)
}

func benchFinish(key, attempt string) idem.FinishParams {
	return idem.FinishParams{Scope: "bench", Key: key, Fence: 1, AttemptID: attempt, State: idem.StateSucceeded,
		Result: []byte("ok"), CompletedAt: benchNow, ExpiresAt: benchNow.Add(time.Hour)}
}

func BenchmarkClaimNew(b *testing.B) {
	e := newBenchEnv(b)
	forClients(b, func(b *testing.B, c int) {
		paired(b, c,
			func(ctx context.Context) error { return e.rawInsert(ctx, benchClaim(e.key(), "a")) },
			func(ctx context.Context) error {
				_, err := e.st.Claim(ctx, benchClaim(e.key(), "a"))
				return err
			})
	})
}

func BenchmarkClaimDuplicate(b *testing.B) {
	e := newBenchEnv(b)
	const hot = 64
	for i := range hot {
		if err := e.rawInsert(context.Background(), benchClaim(fmt.Sprint("dup:", i), "owner")); err != nil {
			b.Fatal(err)
		}
	}
	forClients(b, func(b *testing.B, c int) {
		paired(b, c,
			func(ctx context.Context) error { return e.rawSelect(ctx, fmt.Sprint("dup:", e.seq.Add(1)%hot)) },
			func(ctx context.Context) error {
				res, err := e.st.Claim(ctx, benchClaim(fmt.Sprint("dup:", e.seq.Add(1)%hot), "other"))
				if err == nil && res.Claimed {
					err = fmt.Errorf("duplicate claimed")
				}
				return err
			})
	})
}

// claimed inserts n in_progress records outside the timer, in batches,
// and returns their keys, handed out in order by next.
func (e *benchEnv) claimed(b *testing.B, n int) (next func() string) {
	b.StopTimer()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = e.key()
	}
	for lo := 0; lo < n; lo += 500 {
		batch := keys[lo:min(n, lo+500)]
		q := "INSERT INTO `" + e.table + "` (scope, `key`, fingerprint, state, fence, attempt_id, created_at) VALUES " +
			strings.TrimSuffix(strings.Repeat("('bench', ?, REPEAT('f', 32), 'in_progress', 1, 'a', 0),", len(batch)), ",")
		args := make([]any, len(batch))
		for i, k := range batch {
			args[i] = k
		}
		if _, err := e.db.Exec(q, args...); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	var i atomic.Int64
	return func() string { return keys[i.Add(1)-1] }
}

func BenchmarkFinish(b *testing.B) {
	e := newBenchEnv(b)
	forClients(b, func(b *testing.B, c int) {
		nextRaw, nextIdem := e.claimed(b, b.N), e.claimed(b, b.N)
		paired(b, c,
			func(ctx context.Context) error { return e.rawUpdate(ctx, nextRaw(), "a") },
			func(ctx context.Context) error {
				_, err := e.st.Finish(ctx, benchFinish(nextIdem(), "a"))
				return err
			})
	})
}

func BenchmarkFirstRequest(b *testing.B) {
	e := newBenchEnv(b)
	forClients(b, func(b *testing.B, c int) {
		paired(b, c,
			func(ctx context.Context) error {
				k := e.key()
				if err := e.rawInsert(ctx, benchClaim(k, "a")); err != nil {
					return err
				}
				return e.rawUpdate(ctx, k, "a")
			},
			func(ctx context.Context) error {
				k := e.key()
				if _, err := e.st.Claim(ctx, benchClaim(k, "a")); err != nil {
					return err
				}
				_, err := e.st.Finish(ctx, benchFinish(k, "a"))
				return err
			})
	})
}
