package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// pair is a primary and a streaming standby the test started, the
// standby's replication link running through a relay the test controls.
type pair struct {
	primary, standby *testenv.PGServer
	relay            *testenv.Relay
}

// startPair starts a primary with settings, and a standby named "s1"
// replicating from it through a relay. With sync, s1 is then made the
// primary's synchronous standby (synchronous_standby_names = 's1'); the
// server's synchronous_commit is whatever settings say. It returns once
// the standby streams (as a synchronous standby, with sync).
func startPair(t *testing.T, sync bool, settings ...string) *pair {
	t.Helper()
	p := &pair{primary: testenv.StartPostgres(t, settings...)}
	p.relay = testenv.StartRelay(t, p.primary.Addr())
	p.standby = p.primary.StartStandby(t, p.relay.Addr(), "s1")
	want := "async"
	if sync {
		p.exec(t, "ALTER SYSTEM SET synchronous_standby_names = 's1'")
		p.exec(t, "SELECT pg_reload_conf()")
		want = "sync"
	}
	p.waitState(t, want)
	return p
}

// connect opens a connection to one server, closed when t ends.
func connect(t *testing.T, s *testenv.PGServer) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// exec runs statements on the primary, each on a connection of its own.
func (p *pair) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.primary.DSN())
	if err != nil {
		t.Fatalf("connect to the primary: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitState waits until s1 streams with sync_state want.
func (p *pair) waitState(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.primary.DSN())
	if err != nil {
		t.Fatalf("connect to the primary: %v", err)
	}
	defer c.Close(ctx)
	var state, syncState string
	for ctx.Err() == nil {
		err := c.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 's1'`).Scan(&state, &syncState)
		if err == nil && state == "streaming" && syncState == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("standby s1 not streaming as %s within 30s (state %q, sync_state %q)", want, state, syncState)
}

// caughtUp waits until the standby has replayed everything the primary
// has written so far.
func (p *pair) caughtUp(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := pgx.Connect(ctx, p.primary.DSN())
	if err != nil {
		t.Fatalf("connect to the primary: %v", err)
	}
	defer pc.Close(ctx)
	sc, err := pgx.Connect(ctx, p.standby.DSN())
	if err != nil {
		t.Fatalf("connect to the standby: %v", err)
	}
	defer sc.Close(ctx)
	var lsn string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		var ok bool
		if err := sc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok); err == nil && ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the standby did not replay up to %s within 30s", lsn)
}

// failover kills the primary at once, cuts the (stalled) replication
// link, so nothing it held reaches the standby, and promotes the standby.
func (p *pair) failover(t *testing.T) {
	t.Helper()
	p.primary.Kill()
	p.relay.Cut()
	p.standby.Promote(t)
}

// multiHostDSN names both servers, the store's connections going to the
// one that accepts writes: the primary, then the standby once promoted.
func (p *pair) multiHostDSN() string {
	return fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2&pool_max_conns=40",
		p.primary.Addr(), p.standby.Addr())
}

// openStore opens a migrated store on the pair through the multi-host
// DSN, closed when t ends.
func (p *pair) openStore(t *testing.T, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	cfg.Migrate = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, p.multiHostDSN(), cfg)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// syncRepWaiters lists the primary's backends waiting for synchronous
// replication.
func syncRepWaiters(ctx context.Context, c *pgx.Conn) ([]int32, error) {
	rows, err := c.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

// serverPort is the port of the server a store's pool reaches now.
func serverPort(ctx context.Context, s *pgstore.Store) (int, bool, error) {
	var port int32
	var recovery bool
	err := s.Pool().QueryRow(ctx, "SELECT inet_server_port(), pg_is_in_recovery()").Scan(&port, &recovery)
	return int(port), recovery, err
}

func itoa(n int) string { return strconv.Itoa(n) }
