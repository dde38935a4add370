package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// TestCallTimeoutBoundsAPausedServer: the server stops answering without
// closing the connection (the link through a relay stalls, as a paused
// server or a silent partition does). A claim with no deadline of its
// own fails after Config.CallTimeout instead of hanging, the engine
// answers store-unavailable and runs nothing, and the store works again
// once the server answers. Open sets the server-side statement_timeout
// too. With the eager group commit, where a caller writes the batch it
// leads, concurrent claims on the stalled server each fail within the
// same bound: a batch ends by its requests' deadlines.
func TestCallTimeoutBoundsAPausedServer(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]pgstore.Config{
		"unbatched": {Unbatched: true},
		"eager":     {}, // the default group commit
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			callTimeoutBoundsAPausedServer(t, cfg)
		})
	}
}

func callTimeoutBoundsAPausedServer(t *testing.T, cfg pgstore.Config) {
	dsn := testenv.Postgres.Need(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := freshSchema(t, testPool(t))
	relay := testenv.StartRelay(t, u.Host)
	u.Host = relay.Addr()
	ctx := context.Background()
	cfg.Schema, cfg.Migrate, cfg.CallTimeout, cfg.DisableNotify = schema, true, 400*time.Millisecond, true
	st, err := pgstore.Open(ctx, u.String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stmtTimeout string
	if err := st.Pool().QueryRow(ctx, "SHOW statement_timeout").Scan(&stmtTimeout); err != nil || stmtTimeout != "400ms" {
		t.Fatalf("the sessions' statement_timeout = %q, %v; want 400ms", stmtTimeout, err)
	}
	eng, err := idem.New(st, idem.Config{FinishTimeout: 300 * time.Millisecond, ClockSync: -1, ReplicationCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	pgstore.ForceInsertFirst(st) // claims go to the writer (batched, with batching on), not to a read first
	relay.Stall()
	start := time.Now()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const claims = 8 // enough to make batches when batching is on
	done := make(chan error, claims)
	for i := range claims {
		go func() {
			_, err := st.Claim(ctx, idem.ClaimParams{Key: fmt.Sprint("paused-", i), AttemptID: "a1", Now: now, LeaseUntil: now.Add(time.Minute)})
			done <- err
		}()
	}
	for range claims {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a claim on a server that stopped answering succeeded")
			}
		case <-time.After(5 * time.Second):
			relay.Close() // frees the connections the claims hold, so the store can close
			t.Fatalf("a claim on a server that stopped answering still hangs after %s; want a timeout near 400ms", time.Since(start))
		}
	}
	if submitted, _ := st.BatchStats(); cfg.Batch.On() && submitted == 0 {
		t.Fatal("no claim on the stalled server went through the group commit; the test proves nothing about it")
	}
	ran := false
	start = time.Now()
	_, err = eng.DoBytes(ctx, idem.Request{Key: "paused-again"}, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrStoreUnavailable) || ran || time.Since(start) > 5*time.Second {
		t.Fatalf("DoBytes on a stalled server = %v after %s (ran %v); want store unavailable, bounded, nothing run", err, time.Since(start), ran)
	}
	relay.Resume()
	relay.Cut() // connections whose calls timed out are broken; new ones are clean
	if _, err := eng.DoBytes(ctx, idem.Request{Key: "after"}, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}
}
