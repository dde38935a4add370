package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// checkReplication runs CheckReplication on a store opened on dsn.
func checkReplication(t *testing.T, dsn string, cfg pgstore.Config) idem.Replication {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	rep, err := s.CheckReplication(ctx)
	if err != nil {
		t.Fatalf("CheckReplication: %v", err)
	}
	t.Logf("%s: %q", dsn, rep.Topology)
	for _, f := range rep.Findings {
		t.Logf("  %s: %s", f.Severity, f)
	}
	return rep
}

// findings renders the findings' settings and severities, in order.
func findings(rep idem.Replication) string {
	var parts []string
	for _, f := range rep.Findings {
		parts = append(parts, f.Setting+":"+f.Severity.String())
	}
	return strings.Join(parts, ",")
}

// TestCheckReplicationServers reads real servers: a standalone primary,
// the same with an asynchronous standby (refused), the standby itself
// (refused), then a synchronous standby with claims at the server's
// local level (refused) and with replicated claims (safe), and a role
// without pg_monitor (a warning that it cannot see the standby).
func TestCheckReplicationServers(t *testing.T) {
	t.Parallel()
	primary := testenv.StartPostgres(t, "synchronous_commit=local")
	rep := checkReplication(t, primary.DSN(), pgstore.Config{})
	if rep.Topology != "standalone primary, no standby" || len(rep.Findings) != 0 {
		t.Errorf("standalone: %q %v", rep.Topology, rep.Findings)
	}
	p := &pair{primary: primary, relay: testenv.StartRelay(t, primary.Addr())}
	p.standby = primary.StartStandby(t, p.relay.Addr(), "s1")
	p.waitState(t, "async")

	rep = checkReplication(t, primary.DSN(), pgstore.Config{ReplicatedClaims: "on"})
	if rep.Safe() || findings(rep) != "synchronous_standby_names:refuse" ||
		!strings.Contains(rep.Findings[0].Problem, "asynchronous replication: a failover to a standby loses claims it had not received") ||
		!strings.HasPrefix(rep.Topology, "primary with 1 asynchronous standby") {
		t.Errorf("asynchronous standby: %q %v", rep.Topology, rep.Findings)
	}
	rep = checkReplication(t, p.standby.DSN(), pgstore.Config{})
	if rep.Safe() || findings(rep) != "pg_is_in_recovery():refuse" {
		t.Errorf("standby: %q %v", rep.Topology, rep.Findings)
	}

	p.exec(t, "ALTER SYSTEM SET synchronous_standby_names = 's1'")
	p.exec(t, "SELECT pg_reload_conf()")
	p.waitState(t, "sync")
	rep = checkReplication(t, primary.DSN(), pgstore.Config{})
	if rep.Safe() || findings(rep) != "synchronous_commit:refuse" || rep.Findings[0].Value != "local" {
		t.Errorf("synchronous standby, claims at local: %q %v", rep.Topology, rep.Findings)
	}
	rep = checkReplication(t, primary.DSN(), pgstore.Config{ReplicatedClaims: "on"})
	if !rep.Safe() || len(rep.Findings) != 0 || rep.Topology != "primary with 1 synchronous standby (claims: synchronous_commit=on)" {
		t.Errorf("replicated claims: %q %v", rep.Topology, rep.Findings)
	}
	rep = checkReplication(t, primary.DSN(), pgstore.Config{ReplicatedClaims: "remote_write"})
	if !rep.Safe() || findings(rep) != "synchronous_commit:warning" {
		t.Errorf("remote_write: %q %v", rep.Topology, rep.Findings)
	}

	p.exec(t, "CREATE ROLE plain LOGIN")
	plainDSN := strings.Replace(primary.DSN(), "postgres@", "plain@", 1)
	rep = checkReplication(t, plainDSN, pgstore.Config{ReplicatedClaims: "on"})
	if !rep.Safe() || findings(rep) != "pg_stat_replication:warning" || !strings.Contains(rep.Findings[0].Fix, "pg_monitor") {
		t.Errorf("role without pg_monitor: %q %v", rep.Topology, rep.Findings)
	}
	p.exec(t, "GRANT pg_monitor TO plain")
	rep = checkReplication(t, plainDSN, pgstore.Config{ReplicatedClaims: "on"})
	if !rep.Safe() || len(rep.Findings) != 0 {
		t.Errorf("role with pg_monitor: %q %v", rep.Topology, rep.Findings)
	}
}

// TestReplicatedClaimNeedsNotices: New refuses ReplicatedClaims on a pool
// that does not pass warnings to pgstore, which could not tell a
// cancelled wait for the standbys from a confirmed one.
func TestReplicatedClaimNeedsNotices(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres.Need(t)
	ctx := context.Background()
	pool := testPool(t)
	_, err := pgstore.New(ctx, pool, pgstore.Config{ReplicatedClaims: "on"})
	if err == nil || !strings.Contains(err.Error(), "pgstore.ConfigurePool") {
		t.Fatalf("New on a pool without ConfigurePool: %v, want a refusal naming ConfigurePool", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgstore.ConfigurePool(cfg)
	cfg.ConnConfig.RuntimeParams["client_min_messages"] = "error" // the probe sets its own
	pool2, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	s, err := pgstore.New(ctx, pool2, pgstore.Config{ReplicatedClaims: "on", Schema: freshSchema(t, pool), Migrate: true})
	if err != nil {
		t.Fatalf("New on a configured pool: %v", err)
	}
	defer s.Close()
	// Standalone: the claim's commit does not wait, and succeeds.
	mustClaim(t, s, claimParams("k", "a", t0))
}

// TestReplicatedClaimFailsClosed stalls the link to a synchronous standby:
// a replicated claim then fails closed (ErrNotReplicated, matching
// idem.ErrStoreUnavailable) once ReplicatedClaimTimeout passes, or when
// the caller's ctx ends, on each path a claim commits by (one statement,
// a group-commit batch, a take-over, its own row), and leaves no backend
// waiting behind it. A store without ReplicatedClaims on the same
// server (synchronous_commit=local) does not wait at all.
func TestReplicatedClaimFailsClosed(t *testing.T) {
	t.Parallel()
	f := newStallFixture(t, 300*time.Millisecond)
	// Every claim below is bounded by the store itself: ctx only stops a
	// store that does not bound it from hanging the test.
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	f.p.relay.Stall()
	t.Cleanup(f.p.relay.Resume)

	start := time.Now()
	mustClaim(t, f.plain, claimParams("plain", "a", t0))
	if d := time.Since(start); d > f.timeout {
		t.Errorf("a claim without ReplicatedClaims took %s: it waited for the standby", d)
	}
	f.claimsFailClosed(ctx, t)
	// The caller's ctx ends the wait too.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	slow := f.p.openStore(t, pgstore.Config{Schema: "public", ReplicatedClaims: "on", ReplicatedClaimTimeout: time.Minute})
	start = time.Now()
	_, err := slow.Claim(cctx, claimParams("ctx", "a", t0))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("a claim whose ctx ended: %v after %s, want DeadlineExceeded", err, time.Since(start))
	}
	f.noWaiterLeft(ctx, t)

	// In a caller's transaction the claim makes the caller's COMMIT wait.
	tx, err := f.repl.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, f.repl.WithTx(tx), claimParams("in-tx", "a", t0))
	cctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = tx.Commit(cctx)
	cancel()
	if err == nil {
		t.Errorf("the caller's COMMIT did not wait for the stalled standby")
	}

	// Once the link is back, claims are confirmed again, the own rows
	// of the failed ones included.
	f.p.relay.Resume()
	for _, c := range []struct {
		store *pgstore.Store
		p     idem.ClaimParams
	}{{f.repl, claimParams("first", "a", t0)}, {f.batched, claimParams("first-batched", "a", t0)}, {f.repl, claimParams("after", "a", t0)}} {
		if res := mustClaim(t, c.store, c.p); !res.Claimed {
			t.Errorf("claim %s after the stall: %+v", c.p.Key, res)
		}
	}
}

// stallFixture is a pair with a synchronous standby (the server at
// synchronous_commit=local) and stores on it: plain (no replicated
// claims), repl (on, one statement a claim) and batched (remote_apply,
// group commit), with
// records to take over (expired) and re-drive (unknown), made and
// replicated before the test stalls the link.
type stallFixture struct {
	p                    *pair
	plain, repl, batched *pgstore.Store
	timeout              time.Duration
	unknown              idem.ClaimResult
	mon                  *pgx.Conn
}

func newStallFixture(t *testing.T, timeout time.Duration) *stallFixture {
	t.Helper()
	f := &stallFixture{p: startPair(t, true, "synchronous_commit=local"), timeout: timeout}
	f.plain = f.p.openStore(t, pgstore.Config{})
	f.repl = f.p.openStore(t, pgstore.Config{Schema: "public", ReplicatedClaims: "on", ReplicatedClaimTimeout: timeout, Unbatched: true})
	f.batched = f.p.openStore(t, pgstore.Config{Schema: "public", ReplicatedClaims: "remote_apply", ReplicatedClaimTimeout: timeout,
		Batch: pgstore.Batch{Window: 2 * time.Millisecond}})
	// Before the stall, a replicated claim is confirmed.
	mustClaim(t, f.repl, claimParams("before", "a", t0))
	mustClaim(t, f.batched, claimParams("before-batched", "a", t0))
	old := mustClaim(t, f.plain, claimParams("expired", "a", t0))
	mustFinish(t, f.plain, succeed(old, "old", t0, time.Second))
	f.unknown = mustClaim(t, f.plain, claimParams("unknown", "a", t0))
	if _, err := f.plain.Finish(context.Background(), idem.FinishParams{Scope: f.unknown.Record.Scope, Key: "unknown",
		Fence: f.unknown.Record.Fence, AttemptID: "a", State: idem.StateUnknown, CompletedAt: t0}); err != nil {
		t.Fatal(err)
	}
	f.p.caughtUp(t)
	f.mon = connect(t, f.p.primary)
	return f
}

// claimsFailClosed: each path a claim commits by fails closed, just
// after the timeout, while the link is stalled.
func (f *stallFixture) claimsFailClosed(ctx context.Context, t *testing.T) {
	t.Helper()
	notReplicated := func(name string, err error, took time.Duration) {
		t.Helper()
		if !errors.Is(err, pgstore.ErrNotReplicated) || !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Errorf("%s during the stall: %v, want ErrNotReplicated (ErrStoreUnavailable)", name, err)
		}
		if took < f.timeout || took > f.timeout+2*time.Second {
			t.Errorf("%s failed after %s, want just over %s", name, took, f.timeout)
		}
	}
	for _, c := range []struct {
		name  string
		store *pgstore.Store
		p     idem.ClaimParams
	}{
		{"a first claim", f.repl, claimParams("first", "a", t0)},
		{"a batched first claim", f.batched, claimParams("first-batched", "a", t0)},
		{"a take-over of an expired record", f.repl, claimParams("expired", "b", t0.Add(time.Hour))},
		{"a claim finding its own row", f.repl, claimParams("first", "a", t0)},
		{"a batched claim finding its own row", f.batched, claimParams("first-batched", "a", t0)},
	} {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := c.store.Claim(cctx, c.p)
		cancel()
		notReplicated(c.name, err, time.Since(start))
		if err == nil {
			t.Errorf("%s reported %+v", c.name, res)
		}
	}
	// A re-drive (resolving an unknown record to in_progress for a new
	// attempt) is a claim too.
	start := time.Now()
	rec := f.unknown.Record
	_, err := f.repl.Resolve(ctx, idem.ResolveParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence,
		From: []idem.State{idem.StateUnknown}, To: idem.StateInProgress, AttemptID: "r", Now: t0, LeaseUntil: t0.Add(time.Minute)})
	notReplicated("a re-drive", err, time.Since(start))
}

// noWaiterLeft: each interrupted wait was cancelled on the server too,
// not left waiting there.
func (f *stallFixture) noWaiterLeft(ctx context.Context, t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := syncRepWaiters(ctx, f.mon)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends still waiting for the standby: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
