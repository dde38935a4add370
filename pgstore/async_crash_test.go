package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// TestAsyncOutcomesCrash answers first-time requests, kills the
// PostgreSQL server of the test's own at once (SIGKILL to every process,
// as a machine that dies), restarts it and retries every key once its
// lease has run out. With durable outcomes (the default) every retry is a
// replay. With AsyncOutcomes the last outcome was still in the server's
// WAL buffers (wal_writer_delay=10s keeps the WAL writer from writing it;
// each earlier outcome was flushed by the next request's claim, a durable
// commit): its record comes back in_progress and its retry answers
// unknown (DESIGN §12: a relaxed outcome write leaves unknown after a
// crash, never a second effect). In both, no effect runs twice.
func TestAsyncOutcomesCrash(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			t.Parallel()
			const walWriter = "wal_writer_delay=10s"
			srv := testenv.StartPostgres(t, walWriter)
			cfg := pgstore.Config{AsyncOutcomes: async, Migrate: true}
			const lease = time.Second
			open := func() *idem.Engine {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				st, err := pgstore.Open(ctx, srv.DSN(), cfg)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				t.Cleanup(func() { st.Close() })
				eng, err := idem.New(st, idem.Config{Lease: lease})
				if err != nil {
					t.Fatalf("engine: %v", err)
				}
				t.Cleanup(func() { eng.Close() })
				return eng
			}
			eff := &effects{runs: map[string]int{}}
			keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
			eng := open()
			ctx := context.Background()
			for _, k := range keys {
				if _, err := eng.DoBytes(ctx, request(k), eff.handler(k)); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
			}
			srv.Kill() // right after the last answer
			srv.Restart(walWriter)
			eng = open()
			time.Sleep(lease + 500*time.Millisecond) // the dead attempts' leases run out

			var replayed, unknown []string
			for _, k := range keys {
				res, err := eng.DoBytes(ctx, request(k), eff.handler(k))
				switch {
				case err == nil && res.Replayed:
					replayed = append(replayed, k)
				case errors.Is(err, idem.ErrUnknownOutcome):
					unknown = append(unknown, k)
				default:
					t.Errorf("%s after the crash: %+v, %v; want a replay or unknown", k, res, err)
				}
				if n := eff.count(k); n != 1 {
					t.Errorf("%s: effect ran %d times", k, n)
				}
			}
			t.Logf("after the crash: replayed %v, unknown %v", replayed, unknown)
			switch {
			case !async && len(unknown) > 0:
				t.Errorf("durable outcomes lost in the crash: %v", unknown)
			case async && len(unknown) == 0:
				t.Errorf("no outcome lost: the last one was flushed before the crash, so this run shows nothing about AsyncOutcomes")
			case async && len(unknown) > 1:
				t.Errorf("outcomes %v lost, want only the last: each earlier one was flushed by the claim after it", unknown)
			}
		})
	}
}
