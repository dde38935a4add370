package mysqlstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/internal/testenv/counts"
	"github.com/idemkit/idem/mysqlstore"
)

// BenchmarkClaimFinish is a first-time request through the store — Claim,
// then Finish with the claim, as the engine sends them — from 16 callers
// on a table already holding prefill records, loaded by multi-row INSERTs
// (benchstat compares the sizes).
func BenchmarkClaimFinish(b *testing.B) {
	for _, n := range testenv.BenchPrefills(b) {
		b.Run("prefill="+counts.Label(n), func(b *testing.B) {
			db := sharedPool(b)
			table := testTable(b, db)
			ctx := context.Background()
			st, err := mysqlstore.Open(ctx, testenv.MySQL.Need(b), mysqlstore.Config{Table: table, Migrate: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			result := []byte(strings.Repeat("x", 200))
			fpb := make([]byte, 32)
			const perStmt = 500
			for lo := int64(0); lo < n; lo += perStmt {
				var q strings.Builder
				q.WriteString("INSERT INTO `" + table + "` (scope, `key`, fingerprint, state, fence, attempt_id, result, mark, created_at, lease_until, completed_at, expires_at) VALUES ")
				var args []any
				for i := lo; i < min(n, lo+perStmt); i++ {
					if i > lo {
						q.WriteString(",")
					}
					q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
					c := benchNow.Add(time.Duration(i-n) * time.Microsecond).UnixMicro()
					args = append(args, "bench", "pf-"+strconv.FormatInt(i, 10), fpb, "succeeded", 1,
						"0123456789abcdef0123456789abcdef", result, "", c, c+30e6, c, benchNow.Add(24*time.Hour).UnixMicro())
				}
				if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			b.ResetTimer()
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p := benchClaim(fmt.Sprint("first-", seq.Add(1)), "a")
					r, err := st.Claim(ctx, p)
					if err != nil || !r.Claimed {
						b.Error(err)
						return
					}
					f := benchFinish(p.Key, "a")
					f.Result, f.Claim = result, r.Record
					if _, err := st.Finish(ctx, f); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
