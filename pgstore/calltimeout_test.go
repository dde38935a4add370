package pgstore_test

import (
	"context"
	"errors"
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
// too.
func TestCallTimeoutBoundsAPausedServer(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres.Need(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := freshSchema(t, testPool(t))
	relay := testenv.StartRelay(t, u.Host)
	u.Host = relay.Addr()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, u.String(), pgstore.Config{Schema: schema, Migrate: true, CallTimeout: 400 * time.Millisecond, DisableNotify: true})
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

	relay.Stall()
	start := time.Now()
	now := time.Now().UTC().Truncate(time.Microsecond)
	done := make(chan error, 1)
	go func() {
		_, err := st.Claim(ctx, idem.ClaimParams{Key: "paused", AttemptID: "a1", Now: now, LeaseUntil: now.Add(time.Minute)})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a claim on a server that stopped answering succeeded")
		}
	case <-time.After(5 * time.Second):
		relay.Close() // frees the connection the claim holds, so the store can close
		t.Fatalf("a claim on a server that stopped answering still hangs after %s; want a timeout near 400ms", time.Since(start))
	}
	ran := false
	start = time.Now()
	_, err = eng.DoBytes(ctx, idem.Request{Key: "paused-2"}, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrStoreUnavailable) || ran || time.Since(start) > 5*time.Second {
		t.Fatalf("DoBytes on a stalled server = %v after %s (ran %v); want store unavailable, bounded, nothing run", err, time.Since(start), ran)
	}
	relay.Resume()
	relay.Cut() // connections whose calls timed out are broken; new ones are clean
	if _, err := eng.DoBytes(ctx, idem.Request{Key: "after"}, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}
}
