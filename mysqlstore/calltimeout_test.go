package mysqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/mysqlstore"
)

// TestCallTimeoutBoundsAPausedServer: the server stops answering without
// closing the connection (its link through a relay stalls). A claim with
// no deadline of its own fails after Config.CallTimeout instead of
// hanging; the engine answers store-unavailable and runs nothing; the
// store works again once the server answers.
func TestCallTimeoutBoundsAPausedServer(t *testing.T) {
	t.Parallel()
	db, dsn := rawDB(t)
	table := testTable(t, db)
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	relay := testenv.StartRelay(t, mc.Addr)
	mc.Addr = relay.Addr()
	ctx := context.Background()
	st, err := mysqlstore.Open(ctx, mc.FormatDSN(), mysqlstore.Config{Table: table, Migrate: true, CallTimeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	relay.Cut()
	if _, err := eng.DoBytes(ctx, idem.Request{Key: "after"}, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}
}
