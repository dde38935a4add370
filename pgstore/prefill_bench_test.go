package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/internal/testenv/counts"
	"github.com/idemkit/idem/pgstore"
)

// prefillTable COPYs n succeeded records with 200-byte results into s's
// table, created a microsecond apart and expiring in a day, then ANALYZEs.
func prefillTable(b *testing.B, s *pgstore.Store, n int64) {
	if n == 0 {
		return
	}
	ctx := context.Background()
	fp := make([]byte, 32)
	result := []byte(strings.Repeat("x", 200))
	base := t0.Add(-24 * time.Hour)
	cols := []string{"scope", "key", "fingerprint", "state", "fence", "attempt_id", "result", "created_at", "lease_until", "completed_at", "expires_at"}
	attempt := pgstore.EncodeAttempt("0123456789abcdef0123456789abcdef")
	const batch = 50_000
	for lo := int64(0); lo < n; lo += batch {
		rows := make([][]any, 0, batch)
		for i := lo; i < min(n, lo+batch); i++ {
			c := base.Add(time.Duration(i) * time.Microsecond)
			rows = append(rows, []any{"tenant-1", "pf-" + strconv.FormatInt(i, 10), fp, "s", int64(1),
				attempt, result, c, c.Add(30 * time.Second), c, t0.Add(24 * time.Hour)})
		}
		if _, err := sharedPool().CopyFrom(ctx, pgx.Identifier{s.Schema(), s.Config().Table}, cols, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := sharedPool().Exec(ctx, "ANALYZE "+s.QuotedTable()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimFinish is a first-time request through the store — Claim,
// then Finish with the claim, as the engine sends them — from 16 callers
// on a table already holding prefill records (benchstat compares the
// sizes: prefill=0 against prefill=1M).
func BenchmarkClaimFinish(b *testing.B) {
	for _, n := range testenv.BenchPrefills(b) {
		b.Run("prefill="+counts.Label(n), func(b *testing.B) {
			s, _ := benchStore(b)
			prefillTable(b, s, n)
			ctx := context.Background()
			result := []byte(strings.Repeat("x", 200))
			runConcurrent(b, func(i int64) {
				c, err := s.Claim(ctx, claimParams(fmt.Sprint("first-", i), "a", t0))
				if err != nil || !c.Claimed {
					b.Fatal(err)
				}
				p := succeed(c, "", t0, time.Hour)
				p.Result, p.Claim = result, c.Record
				if _, err := s.Finish(ctx, p); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
