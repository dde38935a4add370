package sqlitestore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/internal/testenv/counts"
)

// prefillSQL inserts n succeeded records with 200-byte results into table
// through db, in multi-row INSERTs (times in unix microseconds).
func prefillSQL(b *testing.B, db *sql.DB, table, keyCol string, n int64) {
	ctx := context.Background()
	fp := make([]byte, 32)
	result := []byte(strings.Repeat("x", 200))
	base := t0.Add(-24 * time.Hour)
	const perStmt, perTx = 500, 50_000
	for lo := int64(0); lo < n; lo += perTx {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for a := lo; a < min(n, lo+perTx); a += perStmt {
			var q strings.Builder
			q.WriteString("INSERT INTO " + table + " (scope, " + keyCol + ", fingerprint, state, fence, attempt_id, result, mark, created_at, lease_until, completed_at, expires_at) VALUES ")
			var args []any
			for i := a; i < min(n, a+perStmt); i++ {
				if i > a {
					q.WriteString(",")
				}
				q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
				c := base.Add(time.Duration(i) * time.Microsecond).UnixMicro()
				args = append(args, "tenant-a", "pf-"+strconv.FormatInt(i, 10), fp, "succeeded", 1,
					"0123456789abcdef0123456789abcdef", result, "", c, c+30e6, c, t0.Add(24*time.Hour).UnixMicro())
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				_ = tx.Rollback()
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimFinish is a first-time request through the store — Claim,
// then Finish with the claim, as the engine sends them — from 16 callers
// (synchronous=FULL, the default) on a database already holding prefill
// records (benchstat compares the sizes).
func BenchmarkClaimFinish(b *testing.B) {
	for _, n := range testenv.BenchPrefills(b) {
		b.Run("prefill="+counts.Label(n), func(b *testing.B) {
			path := tempPath(b)
			if n > 0 {
				s := openAt(b, path)
				db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
				if err != nil {
					b.Fatal(err)
				}
				prefillSQL(b, db, "idem_records", "key", n)
				_ = db.Close()
				_ = s.Close()
			}
			ctx := context.Background()
			s, err := Open(ctx, path, Config{Migrate: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			result := []byte(strings.Repeat("x", 200))
			b.ResetTimer()
			runClients(b, 16, func(i int64) error {
				p := claimParams("first-"+strconv.FormatInt(i, 10), "att")
				r, err := s.Claim(ctx, p)
				if err != nil {
					return err
				}
				_, err = s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: r.Record.Fence,
					AttemptID: p.AttemptID, State: idem.StateSucceeded, Result: result,
					CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r.Record})
				return err
			})
		})
	}
}
