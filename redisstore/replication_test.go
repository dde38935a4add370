package redisstore

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// primary is a nodeRepl of a primary with online replicas.
func primary(addr string, online int) nodeRepl {
	n := nodeRepl{addr: addr, role: "master"}
	for i := range online {
		n.replicas = append(n.replicas, replicaInfo{addr: "127.0.0.1:" + string(rune('1'+i)), state: "online"})
	}
	return n
}

// TestJudgeReplication is the judgement of CheckReplication, table-driven:
// which setups a failover can lose a claim on (refuse), which are weaker
// or fail closed (warning), which are safe.
func TestJudgeReplication(t *testing.T) {
	all := &WaitConfig{Replicas: AllReplicas, MinReplicas: 1}
	all2 := &WaitConfig{Replicas: AllReplicas, MinReplicas: 2}
	one := &WaitConfig{Replicas: 1}
	two := &WaitConfig{Replicas: 2}
	three := &WaitConfig{Replicas: 3}
	aofOnly := &WaitConfig{AOFLocal: 1}
	aofReplicas := &WaitConfig{AOFReplicas: 2}
	sentinel := func(replicas ...sentinelReplica) *sentinelView {
		return &sentinelView{master: "m", sentinels: 3, quorum: 2, replicas: replicas}
	}
	up := func(addr string) sentinelReplica {
		return sentinelReplica{addr: addr, flags: "slave", link: "ok", priority: 100}
	}
	away := func(addr string, priority int) sentinelReplica {
		return sentinelReplica{addr: addr, flags: "slave,s_down,disconnected", link: "err", priority: priority}
	}
	withConfigErr := primary("", 1)
	withConfigErr.configErr = "ERR unknown command 'CONFIG'"
	syncing := primary("", 1)
	syncing.replicas = append(syncing.replicas, replicaInfo{addr: "127.0.0.1:9", state: "wait_bgsave"})
	minWrite := primary("", 2)
	minWrite.minToWrite = 1

	cases := []struct {
		name     string
		cluster  bool
		nodes    []nodeRepl
		sv       *sentinelView
		wait     *WaitConfig
		topology string
		want     []string // "severity setting" of each finding, in order
	}{
		{name: "standalone without replicas", nodes: []nodeRepl{primary("", 0)},
			topology: "standalone Redis primary, no replica"},
		{name: "standalone without replicas, waiting", nodes: []nodeRepl{primary("", 0)}, wait: all,
			topology: "standalone Redis primary, no replica", want: []string{"warning wait_replicas"}},
		{name: "standalone without replicas, WAITAOF local", nodes: []nodeRepl{primary("", 0)}, wait: aofOnly},
		{name: "a replica", nodes: []nodeRepl{{role: "slave"}}, wait: all,
			topology: "a Redis replica (role slave)", want: []string{"refuse role"}},
		{name: "replicas, no wait", nodes: []nodeRepl{primary("", 2)},
			topology: "Redis primary with 2 replicas (claims do not wait for replicas)", want: []string{"refuse wait_replicas"}},
		{name: "replicas, WAITAOF local only", nodes: []nodeRepl{primary("", 1)}, wait: aofOnly,
			want: []string{"refuse wait_replicas"}},
		{name: "replicas, min-replicas-to-write is not a wait", nodes: []nodeRepl{minWrite},
			want: []string{"refuse wait_replicas"}},
		{name: "a replica still syncing counts", nodes: []nodeRepl{syncing},
			want: []string{"refuse wait_replicas"}},
		{name: "wait 1 of 2", nodes: []nodeRepl{primary("", 2)}, wait: one,
			topology: "Redis primary with 2 replicas (claims wait for 1)", want: []string{"refuse wait_replicas"}},
		{name: "wait 2 of 2", nodes: []nodeRepl{primary("", 2)}, wait: two,
			want: []string{"warning wait_replicas"}},
		{name: "WAITAOF 2 of 2", nodes: []nodeRepl{primary("", 2)}, wait: aofReplicas,
			want: []string{"warning wait_replicas"}},
		{name: "wait 3 of 2", nodes: []nodeRepl{primary("", 2)}, wait: three,
			want: []string{"warning wait_replicas"}},
		{name: "wait all", nodes: []nodeRepl{primary("", 2)}, wait: all,
			topology: "Redis primary with 2 replicas (claims wait for all, at least 1)"},
		{name: "wait all, fewer than min", nodes: []nodeRepl{primary("", 1)}, wait: all2,
			want: []string{"warning min_replicas"}},
		{name: "CONFIG refused", nodes: []nodeRepl{withConfigErr}, wait: all,
			want: []string{"warning CONFIG"}},
		{name: "CONFIG refused without replicas says nothing", nodes: []nodeRepl{{role: "master", configErr: "ERR"}}},
		{name: "sentinel, wait all", nodes: []nodeRepl{primary("", 2)}, sv: sentinel(up("a"), up("b")), wait: all,
			topology: `Redis primary "m" (3 Sentinels, quorum 2) with 2 replicas (claims wait for all, at least 1)`},
		{name: "sentinel, no wait", nodes: []nodeRepl{primary("", 2)}, sv: sentinel(up("a"), up("b")),
			want: []string{"refuse wait_replicas"}},
		{name: "sentinel, a replica away", nodes: []nodeRepl{primary("", 1)}, sv: sentinel(up("a"), away("b", 100)), wait: all,
			topology: `Redis primary "m" (3 Sentinels, quorum 2) with 2 replicas, 1 connected (claims wait for all, at least 1)`,
			want:     []string{"warning replicas"}},
		{name: "sentinel, a replica away that is never promoted", nodes: []nodeRepl{primary("", 1)}, sv: sentinel(up("a"), away("b", 0)), wait: all},
		{name: "sentinel, every replica away, no wait", nodes: []nodeRepl{primary("", 0)}, sv: sentinel(away("a", 100)),
			want: []string{"refuse wait_replicas"}},
		{name: "cluster without replicas", cluster: true, nodes: []nodeRepl{primary("a:1", 0), primary("b:2", 0), primary("c:3", 0)},
			topology: "Redis Cluster: 3 masters, no replicas"},
		{name: "cluster, no wait", cluster: true, nodes: []nodeRepl{primary("a:1", 1), primary("b:2", 1), primary("c:3", 1)},
			topology: "Redis Cluster: 3 masters, 1 replica each (claims do not wait for replicas)",
			want:     []string{"refuse wait_replicas", "refuse wait_replicas", "refuse wait_replicas"}},
		{name: "cluster, wait all", cluster: true, nodes: []nodeRepl{primary("a:1", 1), primary("b:2", 1), primary("c:3", 1)}, wait: all,
			topology: "Redis Cluster: 3 masters, 1 replica each (claims wait for all, at least 1)"},
		{name: "cluster, uneven, wait 1", cluster: true, nodes: []nodeRepl{primary("a:1", 2), primary("b:2", 1), primary("c:3", 0)}, wait: one,
			topology: "Redis Cluster: 3 masters, replicas 2/1/0 (claims wait for 1)",
			want:     []string{"refuse wait_replicas", "warning wait_replicas", "warning wait_replicas"}},
		{name: "cluster, a master lost its replica, wait all", cluster: true, nodes: []nodeRepl{primary("a:1", 1), primary("b:2", 0)}, wait: all,
			want: []string{"warning wait_replicas"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := judgeReplication(tc.cluster, tc.nodes, tc.sv, tc.wait)
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.Severity.String()+" "+f.Setting)
				if f.Problem == "" || f.Fix == "" || f.Value == "" {
					t.Errorf("finding %+v lacks a value, problem or fix", f)
				}
				if f.Severity == idem.SeverityRefuse && f.Setting == "wait_replicas" {
					if !strings.Contains(f.Problem, "asynchronous replication") || !strings.Contains(f.Fix, "wait_replicas=all") {
						t.Errorf("refusal %+v does not say asynchronous replication and the fix", f)
					}
				}
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("findings %q, want %q\n%+v", got, tc.want, r.Findings)
			}
			if tc.topology != "" && r.Topology != tc.topology {
				t.Errorf("topology %q, want %q", r.Topology, tc.topology)
			}
			if safe := !strings.Contains(strings.Join(tc.want, ","), "refuse"); r.Safe() != safe {
				t.Errorf("Safe() = %v, want %v", r.Safe(), safe)
			}
		})
	}
}

// TestParseInfoReplication reads a primary's and a replica's INFO.
func TestParseInfoReplication(t *testing.T) {
	n := parseInfoReplication("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
		"slave0:ip=127.0.0.1,port=7301,state=online,offset=1234,lag=0\r\n" +
		"slave1:ip=127.0.0.1,port=7302,state=wait_bgsave,offset=0,lag=3\r\nmaster_repl_offset:1234\r\n")
	if n.role != "master" || len(n.replicas) != 2 || n.online() != 1 {
		t.Fatalf("%+v", n)
	}
	if r := n.replicas[0]; r.addr != "127.0.0.1:7301" || r.offset != 1234 || r.state != "online" {
		t.Errorf("replica 0: %+v", r)
	}
	if r := n.replicas[1]; r.lag != 3 || r.state != "wait_bgsave" {
		t.Errorf("replica 1: %+v", r)
	}
	if n := parseInfoReplication("# Replication\nrole:slave\nmaster_host:127.0.0.1\nslave_read_only:1\n"); n.role != "slave" || len(n.replicas) != 0 {
		t.Errorf("replica: %+v", n)
	}
}
