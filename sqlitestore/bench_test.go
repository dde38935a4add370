package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// The benchmarks compare idem's store with the raw driver running the
// minimal statements of the same work on the same database, in the same
// run: first time = INSERT + UPDATE (two commits), replay = one SELECT.

var benchClients = []int{1, 16}

// runClients runs op b.N times across clients goroutines.
func runClients(b *testing.B, clients int, op func(i int64) error) {
	var n atomic.Int64
	if clients == 1 {
		for b.Loop() {
			if err := op(n.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchStore opens a fresh store; "NORMAL" takes the fsync out of each
// commit, leaving the CPU cost that idem adds to the raw statements.
func benchStore(b *testing.B, sync string) *Store {
	s, err := Open(context.Background(), tempPath(b), Config{Synchronous: sync, Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkFirstTime(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run(sync, func(b *testing.B) { benchFirstTime(b, sync) })
	}
}

func benchFirstTime(b *testing.B, sync string) {
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("idem/clients=%d", c), func(b *testing.B) {
			s, ctx := benchStore(b, sync), context.Background()
			runClients(b, c, func(i int64) error {
				p := claimParams("first-"+strconv.FormatInt(i, 10), "att")
				r, err := s.Claim(ctx, p)
				if err != nil {
					return err
				}
				_, err = s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: r.Record.Fence,
					AttemptID: p.AttemptID, State: idem.StateSucceeded, Result: []byte("ok"),
					CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r.Record})
				return err
			})
		})
		b.Run(fmt.Sprintf("raw/clients=%d", c), func(b *testing.B) {
			s, ctx := benchStore(b, sync), context.Background()
			ins, upd := prepareRaw(b, s)
			runClients(b, c, func(i int64) error {
				p := claimParams("first-"+strconv.FormatInt(i, 10), "att")
				if _, err := ins.ExecContext(ctx, p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, p.Intent,
					p.Now.UnixMicro(), p.LeaseUntil.UnixMicro()); err != nil {
					return err
				}
				_, err := upd.ExecContext(ctx, []byte("ok"), t0.UnixMicro(), t0.Add(time.Hour).UnixMicro(), p.Scope, p.Key)
				return err
			})
		})
	}
}

// prepareRaw prepares the raw first-time statements on s's writer.
func prepareRaw(b *testing.B, s *Store) (ins, upd *sql.Stmt) {
	ins, err := s.DB().Prepare(`INSERT INTO idem_records
		(scope, key, fingerprint, state, fence, attempt_id, intent, created_at, lease_until)
		VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	upd, err = s.DB().Prepare(`UPDATE idem_records SET state = 'succeeded', result = ?,
		completed_at = ?, expires_at = ? WHERE scope = ? AND key = ?`)
	if err != nil {
		b.Fatal(err)
	}
	return ins, upd
}

const replayKeys = 1000

func BenchmarkReplay(b *testing.B) {
	for _, c := range benchClients {
		s, ctx := newStore(b), context.Background()
		for i := range replayKeys {
			p := claimParams("replay-"+strconv.Itoa(i), "att")
			r, err := s.Claim(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: r.Record.Fence,
				AttemptID: p.AttemptID, State: idem.StateSucceeded, Result: []byte("ok"),
				CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("idem/clients=%d", c), func(b *testing.B) {
			runClients(b, c, func(i int64) error {
				r, err := s.Claim(ctx, claimParams("replay-"+strconv.FormatInt(i%replayKeys, 10), "dup"))
				if err == nil && r.Claimed {
					err = fmt.Errorf("replay claimed")
				}
				return err
			})
		})
		b.Run(fmt.Sprintf("raw/clients=%d", c), func(b *testing.B) {
			sel, err := s.readers.Prepare(`SELECT ` + columns + ` FROM idem_records WHERE scope = ? AND key = ?`)
			if err != nil {
				b.Fatal(err)
			}
			defer sel.Close()
			runClients(b, c, func(i int64) error {
				_, err := scanRecord(sel.QueryRowContext(ctx, "tenant-a", "replay-"+strconv.FormatInt(i%replayKeys, 10)))
				return err
			})
		})
	}
}
