package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/mysqlstore"
)

// The loopback ports this package's own servers listen on (13300–13389;
// storeopen's tests use 13390–13399), and Galera's group communication,
// IST and SST ports (14560–14599).
const (
	portPrimary   = 13300
	portReplica   = 13301
	portGalera1   = 13310 // and 13311
	portGaleraF   = 13312 // and 13313: the Galera failover test
	portFailoverP = 13320
	portFailoverR = 13321
	portGcomm     = 14560 // three ports a node: gcomm, IST, SST
	portGcommF    = 14566 // the Galera failover test's
)

// TestCheckReplicationStandalone: the shared test server (standalone, no
// replica) is safe, with no finding, and idem.New starts on it.
func TestCheckReplicationStandalone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rep, err := f.st.CheckReplication(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || !rep.Safe() || !strings.Contains(rep.Topology, "standalone") {
		t.Fatalf("standalone server: %+v; want safe, no finding", rep)
	}
	if _, err := idem.New(f.st, idem.Config{}); err != nil {
		t.Fatalf("idem.New on a standalone server: %v", err)
	}
}

// admin opens a pool on a test server for the test's own statements.
func admin(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// execAll runs statements in order on db.
func execAll(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// variable reads one global status or variable with SHOW.
func variable(t testing.TB, db *sql.DB, show, name string) string {
	t.Helper()
	var n, v string
	if err := db.QueryRow(show+" LIKE '"+name+"'").Scan(&n, &v); err != nil {
		t.Fatalf("%s %s: %v", show, name, err)
	}
	return v
}

// tryVariable is variable for polling: "" when it cannot be read (a
// Galera joiner drops connections during its state transfer).
func tryVariable(db *sql.DB, show, name string) string {
	var n, v string
	if err := db.QueryRow(show+" LIKE '"+name+"'").Scan(&n, &v); err != nil {
		return ""
	}
	return v
}

// waitUntil polls cond every 50 ms until it holds, or fails the test
// after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openStore opens a store on a test server of the test's own.
func openStore(t testing.TB, dsn string, migrate bool) *mysqlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.Open(ctx, dsn, mysqlstore.Config{Migrate: migrate})
	if err != nil {
		t.Fatalf("Open %s: %v", dsn, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// checkReplication runs the check and lists its findings as "refuse
// setting" / "warning setting".
func checkReplication(t testing.TB, st *mysqlstore.Store) (idem.Replication, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := st.CheckReplication(ctx)
	if err != nil {
		t.Fatalf("CheckReplication: %v", err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Severity.String()+" "+f.Setting)
	}
	return rep, got
}

func wantFindings(t testing.TB, what string, rep idem.Replication, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		var b strings.Builder
		for _, f := range rep.Findings {
			b.WriteString("\n  " + f.Severity.String() + ": " + f.String())
		}
		t.Fatalf("%s (%s): findings %q, want %q%s", what, rep.Topology, got, want, b.String())
	}
}

// replicaPair starts a primary with a binary log and a read-only replica
// that replicates from it through a relay the test controls, and returns
// them with a migrated store on the primary.
type replicaPair struct {
	primary, replica *testenv.MariaDBServer
	relay            *testenv.Relay
	p, r             *sql.DB // admin pools
}

func startReplicaPair(t *testing.T, primaryPort, replicaPort int) *replicaPair {
	t.Helper()
	srv := testenv.NewMariaDBServers(t)
	common := []string{"--log-bin=mysql-bin", "--binlog-format=ROW"}
	rp := &replicaPair{}
	rp.primary = srv.Start("primary", primaryPort, append(common, "--server-id=1")...)
	rp.replica = srv.Start("replica", replicaPort, append(common, "--server-id=2", "--read-only=ON")...)
	rp.relay = testenv.StartRelay(t, rp.primary.Addr())
	rp.p, rp.r = admin(t, rp.primary.DSN), admin(t, rp.replica.DSN)
	execAll(t, rp.r,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", rp.relay.Port()),
		"START SLAVE")
	waitUntil(t, 20*time.Second, "the replica connects", func() bool {
		return variable(t, rp.p, "SHOW GLOBAL STATUS", "Slaves_connected") == "1" &&
			variable(t, rp.r, "SHOW GLOBAL STATUS", "Slave_running") == "ON"
	})
	return rp
}

// enableSemiSync turns semi-synchronous replication on (wait point and
// timeout as given) and waits until the primary runs it.
func (rp *replicaPair) enableSemiSync(t *testing.T, point string, timeoutMS int) {
	t.Helper()
	execAll(t, rp.r, "SET GLOBAL rpl_semi_sync_slave_enabled = ON", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD")
	execAll(t, rp.p, "SET GLOBAL rpl_semi_sync_master_enabled = ON",
		"SET GLOBAL rpl_semi_sync_master_wait_point = "+point,
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_timeout = %d", timeoutMS))
	rp.waitSemiSyncOn(t)
}

func (rp *replicaPair) waitSemiSyncOn(t *testing.T) {
	t.Helper()
	waitUntil(t, 20*time.Second, "semi-synchronous replication switches ON", func() bool {
		return variable(t, rp.p, "SHOW GLOBAL STATUS", "Rpl_semi_sync_master_status") == "ON" &&
			variable(t, rp.p, "SHOW GLOBAL STATUS", "Rpl_semi_sync_master_clients") == "1" &&
			variable(t, rp.p, "SHOW GLOBAL STATUS", "Rpl_semi_sync_master_wait_sessions") == "0"
	})
}

// TestCheckReplicationPrimaryAndReplica, on a primary and a replica the
// test starts: asynchronous replication is refused (idem.New returns
// ErrUnsafeReplication) and the replica itself is refused as read-only
// and a replica; semi-synchronous AFTER_SYNC is safe with the timeout
// warning; AFTER_COMMIT is refused, and the test shows why (a retried
// claim finds its own claim before the replica has it); and a primary
// whose semi-synchronous replication timed out and fell back to
// asynchronous is refused until the replica catches up.
func TestCheckReplicationPrimaryAndReplica(t *testing.T) {
	t.Parallel()
	rp := startReplicaPair(t, portPrimary, portReplica)
	st := openStore(t, rp.primary.DSN, true)
	ctx := context.Background()

	// Asynchronous: refused, by CheckReplication and by idem.New.
	rep, got := checkReplication(t, st)
	wantFindings(t, "asynchronous replica", rep, got, "refuse rpl_semi_sync_master_enabled")
	if !strings.Contains(rep.Topology, "primary with 1 replica") || !strings.Contains(rep.Findings[0].Problem, "asynchronous replication") {
		t.Fatalf("asynchronous replica: %q, %q", rep.Topology, rep.Findings[0].Problem)
	}
	_, err := idem.New(st, idem.Config{})
	var rerr *idem.ReplicationError
	if !errors.Is(err, idem.ErrUnsafeReplication) || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "rpl_semi_sync_master_enabled") {
		t.Fatalf("idem.New on an asynchronous primary = %v, want ErrUnsafeReplication naming rpl_semi_sync_master_enabled", err)
	}
	if _, err := idem.New(st, idem.Config{AllowAsyncReplication: true}); err != nil {
		t.Fatalf("idem.New with AllowAsyncReplication: %v", err)
	}

	// An application user with no privilege beyond its database sees the
	// same: MariaDB's status counters need none. (Created on the
	// primary, it replicates.)
	execAll(t, rp.p, "CREATE USER 'app'@'127.0.0.1'", "GRANT ALL ON test.* TO 'app'@'127.0.0.1'")
	appDSN := func(dsn string) string { return "app" + strings.TrimPrefix(dsn, "root") }
	rep, got = checkReplication(t, openStore(t, appDSN(rp.primary.DSN), false))
	wantFindings(t, "asynchronous replica, unprivileged user", rep, got, "refuse rpl_semi_sync_master_enabled")
	if rep.Topology != "primary with 1 replica, asynchronous" { // SHOW SLAVE HOSTS, which names it, was denied
		t.Fatalf("unprivileged user's topology: %q", rep.Topology)
	}

	// The replica itself: read-only, and replicating.
	waitUntil(t, 10*time.Second, "the records table reaches the replica", func() bool {
		var n int
		return rp.r.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = ?", mysqlstore.DefaultTable).Scan(&n) == nil && n == 1
	})
	onReplica := openStore(t, rp.replica.DSN, false)
	rep, got = checkReplication(t, onReplica)
	wantFindings(t, "the replica", rep, got, "refuse read_only", "refuse SHOW REPLICA STATUS")
	if !strings.Contains(rep.Topology, "replica of 127.0.0.1:") {
		t.Fatalf("the replica's topology: %q", rep.Topology)
	}
	if _, err := idem.New(onReplica, idem.Config{}); !errors.Is(err, idem.ErrUnsafeReplication) {
		t.Fatalf("idem.New on the replica = %v, want ErrUnsafeReplication", err)
	}
	waitUntil(t, 10*time.Second, "the application user reaches the replica", func() bool {
		var n int
		return rp.r.QueryRow("SELECT COUNT(*) FROM mysql.db WHERE User = 'app'").Scan(&n) == nil && n == 1
	})
	rep, got = checkReplication(t, openStore(t, appDSN(rp.replica.DSN), false))
	wantFindings(t, "the replica, unprivileged user", rep, got, "refuse read_only", "refuse SHOW REPLICA STATUS")
	if rep.Findings[1].Value != "Slaves_running = 1 (SHOW REPLICA STATUS not readable)" { // SHOW ALL SLAVES STATUS was denied
		t.Fatalf("unprivileged user on the replica: %s", rep.Findings[1])
	}

	// Semi-synchronous, AFTER_SYNC: safe, with the timeout warning.
	rp.enableSemiSync(t, "AFTER_SYNC", 60000)
	rep, got = checkReplication(t, st)
	wantFindings(t, "semi-sync AFTER_SYNC", rep, got, "warning rpl_semi_sync_master_timeout")
	if !rep.Safe() || !strings.Contains(rep.Topology, "semi-synchronous AFTER_SYNC") {
		t.Fatalf("semi-sync AFTER_SYNC: %+v", rep)
	}
	if _, err := idem.New(st, idem.Config{}); err != nil {
		t.Fatalf("idem.New on semi-sync AFTER_SYNC: %v", err)
	}
	// Sessions that skip the binary log replicate nothing.
	rep, got = checkReplication(t, openStore(t, withParam(rp.primary.DSN, "sql_log_bin=0"), false))
	wantFindings(t, "semi-sync, sql_log_bin=0", rep, got, "refuse sql_log_bin (session)", "warning rpl_semi_sync_master_timeout")

	// AFTER_COMMIT: refused. Why: with the replica stalled, a claim
	// whose answer is lost (its context ends, the driver drops the
	// connection) is committed and visible on the primary while the
	// primary still waits for the replica, and the engine's retry — the
	// same attempt id — finds it as its own claim: the effect would run
	// on a claim no replica has.
	execAll(t, rp.p, "SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_COMMIT")
	rep, got = checkReplication(t, st)
	wantFindings(t, "semi-sync AFTER_COMMIT", rep, got, "refuse rpl_semi_sync_master_wait_point")
	rp.relay.Stall()
	p := claimParams("after-commit", "a1", time.Now())
	lost, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := st.Claim(lost, p); err == nil {
		t.Fatal("a claim with the replica stalled was answered; want its wait cut short by its context")
	}
	cancel()
	retry, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := st.Claim(retry, p)
	cancel()
	if err != nil || !res.Claimed {
		t.Fatalf("AFTER_COMMIT, the retried claim: %+v, %v; want it to find its own claim before the replica has it (the reason AFTER_COMMIT is refused)", res, err)
	}
	rp.relay.Resume()
	rp.waitSemiSyncOn(t)

	// AFTER_SYNC, the same: nobody sees the claim until the replica has
	// it, so the retry fails (closed) instead, and succeeds once the
	// replica acknowledged.
	execAll(t, rp.p, "SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC")
	rp.relay.Stall()
	p = claimParams("after-sync", "a1", time.Now())
	lost, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := st.Claim(lost, p); err == nil {
		t.Fatal("AFTER_SYNC: a claim with the replica stalled was answered")
	}
	cancel()
	retry, cancel = context.WithTimeout(ctx, time.Second)
	res, err = st.Claim(retry, p)
	cancel()
	if err == nil {
		t.Fatalf("AFTER_SYNC, the retried claim with the replica stalled: %+v; want it to wait for the replica and fail", res)
	}
	rp.relay.Resume()
	retry, cancel = context.WithTimeout(ctx, 10*time.Second)
	res, err = st.Claim(retry, p)
	cancel()
	if err != nil || !res.Claimed {
		t.Fatalf("AFTER_SYNC, the retried claim once the replica acknowledged: %+v, %v; want its own claim", res, err)
	}
	rp.waitSemiSyncOn(t)

	// The timeout: a commit the replica does not acknowledge in time is
	// acknowledged anyway, and the primary goes on asynchronously —
	// refused until the replica catches up.
	execAll(t, rp.p, "SET GLOBAL rpl_semi_sync_master_timeout = 200")
	rp.relay.Stall()
	start := time.Now()
	if res := mustClaim(t, st, claimParams("timed-out", "a1", time.Now())); !res.Claimed {
		t.Fatalf("claim past the timeout: %+v", res)
	}
	waited := time.Since(start)
	rep, got = checkReplication(t, st)
	wantFindings(t, "semi-sync fallen back", rep, got, "refuse Rpl_semi_sync_master_status")
	t.Logf("a claim with the replica stalled was acknowledged after %s without it (rpl_semi_sync_master_timeout 200 ms); then: %s", waited.Round(time.Millisecond), rep.Findings[0].Problem)
	rp.relay.Resume()
	execAll(t, rp.p, "SET GLOBAL rpl_semi_sync_master_timeout = 60000")
	// The primary switches back ON when the replica has caught up and
	// acknowledges the next commit.
	waitUntil(t, 20*time.Second, "semi-synchronous replication switches back ON", func() bool {
		mustClaim(t, st, claimParams(fmt.Sprintf("nudge-%d", time.Now().UnixNano()), "a1", time.Now()))
		return variable(t, rp.p, "SHOW GLOBAL STATUS", "Rpl_semi_sync_master_status") == "ON"
	})
	rep, got = checkReplication(t, st)
	wantFindings(t, "semi-sync back ON", rep, got, "warning rpl_semi_sync_master_timeout")
}

// galeraNode starts node i (0 bootstraps the cluster) of a two-node
// Galera cluster on loopback: its client port is port+i, its group
// communication, IST and SST ports gcomm+3i, +1, +2. opts are added to
// wsrep_provider_options.
func galeraNode(t *testing.T, srv *testenv.MariaDBServers, provider string, port, gcomm, i int, opts ...string) *testenv.MariaDBServer {
	t.Helper()
	g := func(n int) int { return gcomm + 3*n }
	popts := append([]string{
		fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d", g(i)), fmt.Sprintf("ist.recv_addr=127.0.0.1:%d", g(i)+1),
		// A small gcache; failure detection in about two seconds, not
		// fifteen.
		"gcache.size=16M", "evs.keepalive_period=PT0.2S", "evs.suspect_timeout=PT1S", "evs.inactive_check_period=PT0.5S",
		"evs.inactive_timeout=PT2S", "evs.install_timeout=PT2S",
	}, opts...)
	args := []string{
		"--wsrep-on=ON", "--wsrep-provider=" + provider, "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
		"--wsrep-cluster-name=idemtest", "--wsrep-sst-method=rsync",
		fmt.Sprintf("--wsrep-cluster-address=gcomm://127.0.0.1:%d,127.0.0.1:%d", g(0), g(1)),
		fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", g(i)),
		fmt.Sprintf("--wsrep-node-incoming-address=127.0.0.1:%d", port+i),
		fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", g(i)+2),
		"--wsrep-provider-options=" + strings.Join(popts, ";"),
	}
	if i == 0 {
		args = append(args, "--wsrep-new-cluster")
	}
	return srv.Start(fmt.Sprintf("galera%d", i+1), port+i, args...)
}

// waitSynced waits until every node is Synced in a cluster of them all.
func waitSynced(t *testing.T, nodes ...*testenv.MariaDBServer) {
	t.Helper()
	size := fmt.Sprint(len(nodes))
	for _, n := range nodes {
		db := admin(t, n.DSN)
		waitUntil(t, 30*time.Second, n.Name+" is Synced in a cluster of "+size, func() bool {
			return tryVariable(db, "SHOW GLOBAL STATUS", "wsrep_local_state_comment") == "Synced" &&
				tryVariable(db, "SHOW GLOBAL STATUS", "wsrep_cluster_size") == size
		})
	}
}

// TestCheckReplicationGalera, on a two-node Galera cluster the test
// starts: a Synced node of the Primary component is safe, with no
// finding (a claim made on one node is on the other); sessions that do
// not replicate (wsrep_on=OFF in the DSN) are refused; and when the other
// node dies and this one loses quorum (non-Primary), it is refused.
func TestCheckReplicationGalera(t *testing.T) {
	t.Parallel()
	provider := testenv.GaleraProvider(t)
	srv := testenv.NewMariaDBServers(t)
	start := time.Now()
	n1 := galeraNode(t, srv, provider, portGalera1, portGcomm, 0)
	n2 := galeraNode(t, srv, provider, portGalera1, portGcomm, 1)
	waitSynced(t, n1, n2)
	db1 := admin(t, n1.DSN)
	t.Logf("two Galera nodes Synced in %s", time.Since(start).Round(time.Millisecond))

	st := openStore(t, n1.DSN, true)
	rep, got := checkReplication(t, st)
	wantFindings(t, "Galera node", rep, got)
	if !strings.Contains(rep.Topology, "Galera node (Synced) in a Primary component of 2 nodes") {
		t.Fatalf("Galera topology: %q", rep.Topology)
	}
	if _, err := idem.New(st, idem.Config{}); err != nil {
		t.Fatalf("idem.New on a Galera node: %v", err)
	}
	// A claim acknowledged on node 1 is on node 2 (wsrep_sync_wait makes
	// the read wait until node 2 applied what it received).
	mustClaim(t, st, claimParams("galera", "a1", time.Now()))
	var n int
	if err := admin(t, withParam(n2.DSN, "wsrep_sync_wait=1")).QueryRow("SELECT COUNT(*) FROM `" + mysqlstore.DefaultTable + "` WHERE `key` = 'galera'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the claim on node 2: %d rows, %v", n, err)
	}

	noRepl := openStore(t, withParam(n1.DSN, "wsrep_on=0"), false)
	rep, got = checkReplication(t, noRepl)
	wantFindings(t, "Galera, session wsrep_on=OFF", rep, got, "refuse wsrep_on (session)")

	n2.Kill()
	killed := time.Now()
	waitUntil(t, 20*time.Second, "node 1 loses quorum", func() bool {
		return tryVariable(db1, "SHOW GLOBAL STATUS", "wsrep_cluster_status") == "non-Primary"
	})
	t.Logf("node 1 non-Primary %s after node 2 was killed", time.Since(killed).Round(time.Millisecond))
	rep, got = checkReplication(t, st)
	wantFindings(t, "Galera node without quorum", rep, got, "refuse wsrep_cluster_status")
	if _, err := idem.New(st, idem.Config{}); !errors.Is(err, idem.ErrUnsafeReplication) {
		t.Fatalf("idem.New on a non-Primary Galera node = %v, want ErrUnsafeReplication", err)
	}
}
