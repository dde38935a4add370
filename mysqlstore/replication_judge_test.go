package mysqlstore

import (
	"maps"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// TestJudgeReplication: each topology CheckReplication can read, judged.
// want lists the findings as "refuse setting" / "warning setting", in
// order; topo and text are substrings of the topology and of the
// findings' text.
func TestJudgeReplication(t *testing.T) {
	mariadb := map[string]string{"version": "10.11.19-MariaDB-0+deb12u1-log", "log_bin": "ON", "read_only": "OFF", "innodb_read_only": "OFF",
		"rpl_semi_sync_master_enabled": "OFF", "rpl_semi_sync_master_wait_point": "AFTER_COMMIT", "rpl_semi_sync_master_timeout": "10000",
		"rpl_semi_sync_master_wait_no_slave": "ON", "wsrep_on": "OFF", "wsrep_provider": "none", "wsrep_cluster_address": ""}
	mariadbStatus := map[string]string{"rpl_semi_sync_master_status": "OFF", "rpl_semi_sync_master_clients": "0",
		"slaves_connected": "0", "slaves_running": "0"}
	session := map[string]string{"sql_log_bin": "ON", "wsrep_on": "OFF", "wsrep_sync_wait": "0"}
	mysql8 := map[string]string{"version": "8.0.36", "version_comment": "MySQL Community Server - GPL", "log_bin": "ON",
		"read_only": "OFF", "super_read_only": "OFF", "innodb_read_only": "OFF"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	semiOn := with(mariadb, "rpl_semi_sync_master_enabled", "ON", "rpl_semi_sync_master_wait_point", "AFTER_SYNC")
	semiStatus := with(mariadbStatus, "rpl_semi_sync_master_status", "ON", "rpl_semi_sync_master_clients", "1", "slaves_connected", "1")
	galera := with(mariadb, "wsrep_on", "ON", "wsrep_provider", "/usr/lib/galera/libgalera_smm.so",
		"wsrep_cluster_address", "gcomm://10.0.0.1,10.0.0.2,10.0.0.3")
	galeraStatus := with(mariadbStatus, "wsrep_cluster_size", "3", "wsrep_cluster_status", "Primary",
		"wsrep_local_state_comment", "Synced", "wsrep_ready", "ON")
	galeraSession := with(session, "wsrep_on", "ON")

	cases := []struct {
		name   string
		f      replFacts
		want   []string
		topo   string
		text   string
		unsafe bool
	}{
		{name: "standalone, binary log off", f: replFacts{vars: with(mariadb, "log_bin", "OFF"), session: session, status: mariadbStatus},
			topo: "standalone MariaDB 10.11.19, no replica connected (binary log off)"},
		{name: "standalone, binary log on", f: replFacts{vars: mariadb, session: session, status: mariadbStatus},
			topo: "standalone MariaDB 10.11.19, no replica connected"},
		{name: "semi-sync enabled, no replica", f: replFacts{vars: semiOn, session: session, status: with(mariadbStatus, "rpl_semi_sync_master_status", "ON")},
			topo: "standalone MariaDB"},
		{name: "asynchronous replica", f: replFacts{vars: mariadb, session: session, status: with(mariadbStatus, "slaves_connected", "1"), replicas: 1, replicaHosts: []string{"db2:3306"}},
			want: []string{"refuse rpl_semi_sync_master_enabled"}, topo: "primary with 1 replica (db2:3306), asynchronous",
			text: "asynchronous replication to 1 replica (db2:3306)", unsafe: true},
		{name: "semi-sync AFTER_SYNC, acknowledged", f: replFacts{vars: semiOn, session: session, status: semiStatus, replicas: 1},
			want: []string{"warning rpl_semi_sync_master_timeout"}, topo: "semi-synchronous AFTER_SYNC (1 acknowledging, rpl_semi_sync_master_timeout 10000 ms)",
			text: "acknowledged anyway"},
		{name: "semi-sync fallen back", f: replFacts{vars: semiOn, session: session, status: with(semiStatus, "rpl_semi_sync_master_status", "OFF"), replicas: 1},
			want: []string{"refuse Rpl_semi_sync_master_status"}, topo: "fallen back to asynchronous", text: "has fallen back to asynchronous", unsafe: true},
		{name: "semi-sync, replica not semi-sync", f: replFacts{vars: semiOn, session: session, status: with(semiStatus, "rpl_semi_sync_master_clients", "0"), replicas: 1},
			want: []string{"refuse Rpl_semi_sync_master_clients"}, text: "rpl_semi_sync_slave_enabled = ON; STOP SLAVE IO_THREAD", unsafe: true},
		{name: "semi-sync AFTER_COMMIT", f: replFacts{vars: with(semiOn, "rpl_semi_sync_master_wait_point", "AFTER_COMMIT"), session: session, status: semiStatus, replicas: 1},
			want: []string{"refuse rpl_semi_sync_master_wait_point"}, topo: "semi-synchronous AFTER_COMMIT", text: "found by the engine's retry as its own", unsafe: true},
		{name: "semi-sync, two replicas", f: replFacts{vars: semiOn, session: session, status: with(semiStatus, "slaves_connected", "2"), replicas: 2},
			want: []string{"warning rpl_semi_sync_master_timeout", "warning semi-synchronous replicas"}, text: "most advanced replica"},
		{name: "semi-sync, wait_no_slave off", f: replFacts{vars: with(semiOn, "rpl_semi_sync_master_wait_no_slave", "OFF"), session: session, status: semiStatus, replicas: 1},
			want: []string{"warning rpl_semi_sync_master_timeout", "warning rpl_semi_sync_master_wait_no_slave"}},
		{name: "sql_log_bin off", f: replFacts{vars: semiOn, session: with(session, "sql_log_bin", "OFF"), status: semiStatus, replicas: 1},
			want: []string{"refuse sql_log_bin (session)", "warning rpl_semi_sync_master_timeout"}, unsafe: true},
		{name: "replicas counted from semi-sync clients", f: replFacts{vars: semiOn, session: session, status: semiStatus, replicas: -1},
			want: []string{"warning rpl_semi_sync_master_timeout"}, topo: "primary with 1 replica"},
		{name: "MySQL 8, asynchronous", f: replFacts{vars: with(mysql8, "rpl_semi_sync_source_enabled", "OFF", "rpl_semi_sync_source_wait_point", "AFTER_SYNC"), session: session, status: map[string]string{}, replicas: 1},
			want: []string{"refuse rpl_semi_sync_source_enabled"}, text: "rpl_semi_sync_replica_enabled = ON; STOP REPLICA IO_THREAD", unsafe: true},
		{name: "MySQL 8, no semisync plugin", f: replFacts{vars: mysql8, session: session, status: map[string]string{}, replicas: 1},
			want: []string{"refuse rpl_semi_sync_source_enabled"}, text: "INSTALL PLUGIN rpl_semi_sync_source", unsafe: true},
		{name: "MySQL 8, semi-sync for all replicas", f: replFacts{
			vars: with(mysql8, "rpl_semi_sync_source_enabled", "ON", "rpl_semi_sync_source_wait_point", "AFTER_SYNC",
				"rpl_semi_sync_source_timeout", "10000", "rpl_semi_sync_source_wait_no_replica", "ON", "rpl_semi_sync_source_wait_for_replica_count", "2"),
			session: session, status: map[string]string{"rpl_semi_sync_source_status": "ON", "rpl_semi_sync_source_clients": "2"}, replicas: 2},
			want: []string{"warning rpl_semi_sync_source_timeout"}},
		{name: "MySQL 8, replicas unreadable", f: replFacts{vars: mysql8, session: session, status: map[string]string{}, replicas: -1,
			unreadable: []idem.Finding{{Setting: "SHOW REPLICAS", Severity: idem.SeverityWarning}}},
			want: []string{"warning SHOW REPLICAS"}, topo: "replicas unknown"},
		{name: "read_only", f: replFacts{vars: with(mariadb, "read_only", "ON"), session: session, status: mariadbStatus},
			want: []string{"refuse read_only"}, topo: "read-only server", unsafe: true},
		{name: "super_read_only", f: replFacts{vars: with(mysql8, "read_only", "ON", "super_read_only", "ON"), session: session, status: map[string]string{}, replicas: 0},
			want: []string{"refuse super_read_only"}, unsafe: true},
		{name: "innodb_read_only", f: replFacts{vars: with(mariadb, "innodb_read_only", "ON"), session: session, status: mariadbStatus},
			want: []string{"refuse innodb_read_only"}, unsafe: true},
		{name: "replica", f: replFacts{vars: with(mariadb, "read_only", "ON"), session: session, status: with(mariadbStatus, "slaves_running", "1"),
			sources: []replSource{{host: "db1:3306", io: "Yes", sqlT: "Yes"}}},
			want: []string{"refuse read_only", "refuse SHOW REPLICA STATUS"}, topo: "replica of db1:3306", text: "RESET REPLICA ALL", unsafe: true},
		{name: "writable replica, IO connecting", f: replFacts{vars: mariadb, session: session, status: mariadbStatus,
			sources: []replSource{{name: "east", host: "db1:3306", io: "Connecting", sqlT: "No"}}},
			want: []string{"refuse SHOW REPLICA STATUS"}, text: "channel east", unsafe: true},
		{name: "replica, status unreadable", f: replFacts{vars: with(mariadb, "read_only", "ON"), session: session, status: with(mariadbStatus, "slaves_running", "1"),
			sources: []replSource{{counted: 1, io: "Yes", sqlT: "Yes"}}},
			want: []string{"refuse read_only", "refuse SHOW REPLICA STATUS"}, topo: "replica of a source", text: "Slaves_running = 1 (SHOW REPLICA STATUS not readable)", unsafe: true},
		{name: "promoted replica, channel left stopped", f: replFacts{vars: mariadb, session: session, status: mariadbStatus,
			sources: []replSource{{host: "db1:3306", io: "No", sqlT: "No"}}},
			want: []string{"warning SHOW REPLICA STATUS"}},
		{name: "Galera, Synced, Primary", f: replFacts{vars: galera, session: galeraSession, status: galeraStatus},
			topo: "Galera node (Synced) in a Primary component of 3 nodes, wsrep_sync_wait=0"},
		{name: "Galera, non-Primary", f: replFacts{vars: galera, session: galeraSession,
			status: with(galeraStatus, "wsrep_cluster_status", "non-Primary", "wsrep_local_state_comment", "Initialized", "wsrep_ready", "OFF", "wsrep_cluster_size", "1")},
			want: []string{"refuse wsrep_cluster_status"}, text: "lost quorum", unsafe: true},
		{name: "Galera, not ready", f: replFacts{vars: galera, session: galeraSession, status: with(galeraStatus, "wsrep_ready", "OFF", "wsrep_local_state_comment", "Joining")},
			want: []string{"refuse wsrep_ready"}, unsafe: true},
		{name: "Galera, donor", f: replFacts{vars: galera, session: galeraSession, status: with(galeraStatus, "wsrep_local_state_comment", "Donor/Desynced")},
			want: []string{"warning wsrep_local_state_comment"}},
		{name: "Galera, session wsrep_on off", f: replFacts{vars: galera, session: session, status: galeraStatus},
			want: []string{"refuse wsrep_on (session)"}, unsafe: true},
		{name: "Galera, alone of three", f: replFacts{vars: galera, session: galeraSession, status: with(galeraStatus, "wsrep_cluster_size", "1")},
			want: []string{"warning wsrep_cluster_size"}, text: "names 3 nodes"},
		{name: "Galera, cluster of one by design", f: replFacts{vars: with(galera, "wsrep_cluster_address", "gcomm://"), session: galeraSession, status: with(galeraStatus, "wsrep_cluster_size", "1")},
			topo: "Primary component of 1 node"},
		{name: "Galera node with an asynchronous replica", f: replFacts{vars: galera, session: galeraSession, status: with(galeraStatus, "slaves_connected", "1"), replicas: 1},
			want: []string{"refuse rpl_semi_sync_master_enabled"}, topo: "Galera node (Synced) in a Primary component of 3 nodes, wsrep_sync_wait=0; primary with 1 replica, asynchronous", unsafe: true},
		{name: "MySQL Group Replication", f: replFacts{vars: with(mysql8, "group_replication_group_name", "aaaaaaaa-bbbb"), session: session, status: map[string]string{}},
			want: []string{"warning group_replication_group_name"}, text: "BEFORE_ON_PRIMARY_FAILOVER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := judgeReplication(c.f)
			var got []string
			var text strings.Builder
			for _, f := range rep.Findings {
				got = append(got, f.Severity.String()+" "+f.Setting)
				text.WriteString(f.String() + "\n")
			}
			if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
				t.Errorf("findings %q, want %q\n%s", got, c.want, text.String())
			}
			if rep.Safe() == c.unsafe {
				t.Errorf("Safe() = %v, want %v", rep.Safe(), !c.unsafe)
			}
			if !strings.Contains(rep.Topology, c.topo) {
				t.Errorf("topology %q, want it to contain %q", rep.Topology, c.topo)
			}
			if !strings.Contains(text.String(), c.text) {
				t.Errorf("findings do not say %q:\n%s", c.text, text.String())
			}
			for _, f := range rep.Findings {
				if f.Setting == "" || f.Value == "" || f.Problem == "" || f.Fix == "" {
					if f.Setting != "SHOW REPLICAS" { // the unreadable finding the case made up
						t.Errorf("finding with an empty field: %+v", f)
					}
				}
			}
		})
	}
}

// TestGcommNodes: the nodes a cluster address names.
func TestGcommNodes(t *testing.T) {
	for addr, want := range map[string]int{
		"": 0, "gcomm://": 0, "gcomm://a": 1, "gcomm://a,b,c": 3, "gcomm://a:4567,b:4567?pc.wait_prim=no": 2,
	} {
		if got := gcommNodes(addr); got != want {
			t.Errorf("gcommNodes(%q) = %d, want %d", addr, got, want)
		}
	}
}
