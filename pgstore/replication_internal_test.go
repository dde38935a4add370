package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestJudgeReplication(t *testing.T) {
	s1 := standby{name: "s1", state: "streaming", syncState: "sync"}
	s2async := standby{name: "s2", state: "streaming", syncState: "async", flushLag: 12 * time.Millisecond, behindBytes: 4096}
	s2potential := standby{name: "s2", state: "streaming", syncState: "potential"}
	s1async := standby{name: "s1", state: "streaming", syncState: "async"}
	hidden := standby{name: "s1", hidden: true}
	quorum := standby{name: "s1", state: "streaming", syncState: "quorum"}
	type want struct {
		setting  string
		severity idem.Severity
		text     string // in the problem
	}
	tests := []struct {
		name     string
		st       replState
		topology string
		want     []want
	}{
		{name: "standalone",
			st:       replState{readOnly: "off", sessionCommit: "on"},
			topology: "standalone primary, no standby"},
		{name: "standalone with an inactive slot",
			st:       replState{readOnly: "off", sessionCommit: "on", physicalSlots: 1, inactiveSlots: 1},
			topology: "primary, no standby connected (1 inactive replication slot)",
			want:     []want{{"pg_replication_slots", idem.SeverityWarning, "no standby streaming"}}},
		{name: "standby server",
			st:       replState{inRecovery: true, readOnly: "on", sessionCommit: "on"},
			topology: "standby server (in recovery)",
			want:     []want{{"pg_is_in_recovery()", idem.SeverityRefuse, "is a standby"}}},
		{name: "read-only sessions",
			st:       replState{readOnly: "on", sessionCommit: "on"},
			topology: "standalone primary, no standby",
			want:     []want{{"transaction_read_only", idem.SeverityRefuse, "read-only"}}},
		{name: "asynchronous standby",
			st:       replState{readOnly: "off", sessionCommit: "on", standbys: []standby{s1async}},
			topology: "primary with 1 asynchronous standby (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityRefuse, "asynchronous replication: a failover to a standby loses claims it had not received"}}},
		{name: "asynchronous standby, replicated claims asked for",
			st:       replState{readOnly: "off", sessionCommit: "local", claimLevel: "on", standbys: []standby{s1async}},
			topology: "primary with 1 asynchronous standby (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityRefuse, "asynchronous replication"}}},
		{name: "asynchronous standby, state unreadable",
			st:       replState{readOnly: "off", sessionCommit: "on", standbys: []standby{hidden}},
			topology: "primary with 1 unreadable standby (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityRefuse, "asynchronous replication"}}},
		{name: "synchronous standby, claims at local",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=local)",
			want:     []want{{"synchronous_commit", idem.SeverityRefuse, "asynchronous replication: a failover to a standby loses claims it had not received"}}},
		{name: "synchronous standby, claims off",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "off", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=off)",
			want:     []want{{"synchronous_commit", idem.SeverityRefuse, "without waiting"}}},
		{name: "synchronous standby, session on",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "on", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=on)"},
		{name: "synchronous standby, replicated claims over a local session",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", claimLevel: "on", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=on)"},
		{name: "remote_apply",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", claimLevel: "remote_apply", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=remote_apply)"},
		{name: "remote_write",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", claimLevel: "remote_write", standbys: []standby{s1}},
			topology: "primary with 1 synchronous standby (claims: synchronous_commit=remote_write)",
			want:     []want{{"synchronous_commit", idem.SeverityWarning, "before the standby flushes"}}},
		{name: "synchronous and asynchronous standbys",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "on", standbys: []standby{s1, s2async}},
			topology: "primary with 1 synchronous and 1 asynchronous standbys (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityWarning, "s2 async, flush lag 12ms, 4096 bytes behind"}}},
		{name: "synchronous and potential standbys",
			st:       replState{readOnly: "off", syncNames: "FIRST 1 (s1, s2)", sessionCommit: "on", standbys: []standby{s1, s2potential}},
			topology: "primary with 1 synchronous and 1 asynchronous standbys (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityWarning, "promotes one of them"}}},
		{name: "quorum",
			st:       replState{readOnly: "off", syncNames: "ANY 1 (s1, s2)", sessionCommit: "on", standbys: []standby{quorum, quorum}},
			topology: "primary with 2 quorum standbys (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityWarning, "quorum commit"}}},
		{name: "synchronous names, no standby connected",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", claimLevel: "on"},
			topology: "primary, no standby connected (claims: synchronous_commit=on)",
			want:     []want{{"synchronous_standby_names", idem.SeverityWarning, "no synchronous standby is connected"}}},
		{name: "synchronous names, only an asynchronous standby connected",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "on", standbys: []standby{s2async}},
			topology: "primary with 1 asynchronous standby (claims: synchronous_commit=on)",
			want: []want{{"synchronous_standby_names", idem.SeverityWarning, "no synchronous standby is connected"},
				{"synchronous_standby_names", idem.SeverityWarning, "asynchronous standbys beside"}}},
		{name: "synchronous names, state unreadable",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "on", standbys: []standby{hidden}},
			topology: "primary with 1 unreadable standby (claims: synchronous_commit=on)",
			want:     []want{{"pg_stat_replication", idem.SeverityWarning, "pg_monitor"}}},
		{name: "synchronous names, state unreadable, claims at local",
			st:       replState{readOnly: "off", syncNames: "s1", sessionCommit: "local", standbys: []standby{hidden}},
			topology: "primary with 1 unreadable standby (claims: synchronous_commit=local)",
			want:     []want{{"synchronous_commit", idem.SeverityRefuse, "asynchronous replication"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeReplication(tt.st)
			if got.Topology != tt.topology {
				t.Errorf("topology %q, want %q", got.Topology, tt.topology)
			}
			if len(got.Findings) != len(tt.want) {
				t.Fatalf("%d findings, want %d: %v", len(got.Findings), len(tt.want), got.Findings)
			}
			refuse := false
			for i, w := range tt.want {
				f := got.Findings[i]
				if f.Setting != w.setting || f.Severity != w.severity || !strings.Contains(f.Problem, w.text) {
					t.Errorf("finding %d = %s (%s), want setting %s, severity %s, problem containing %q", i, f, f.Severity, w.setting, w.severity, w.text)
				}
				if f.Value == "" || f.Fix == "" {
					t.Errorf("finding %d has no value or fix: %+v", i, f)
				}
				refuse = refuse || w.severity == idem.SeverityRefuse
			}
			if got.Safe() == refuse {
				t.Errorf("Safe() = %v with findings %v", got.Safe(), got.Findings)
			}
			for _, f := range got.Findings {
				if f.Severity == idem.SeverityRefuse && f.Setting != "pg_is_in_recovery()" && f.Setting != "transaction_read_only" &&
					!strings.Contains(f.Fix, "replicated_claims=on") {
					t.Errorf("a refusal's fix does not name replicated_claims=on: %s", f.Fix)
				}
			}
		})
	}
}

func TestConfigReplicatedClaims(t *testing.T) {
	for _, level := range []string{"", "on", "remote_apply", "remote_write"} {
		if _, err := (Config{ReplicatedClaims: level}).withDefaults(); err != nil {
			t.Errorf("ReplicatedClaims %q: %v", level, err)
		}
	}
	for _, level := range []string{"local", "off", "ON", "true", "remote"} {
		_, err := (Config{ReplicatedClaims: level}).withDefaults()
		if err == nil || !strings.Contains(err.Error(), "Config.ReplicatedClaims") {
			t.Errorf("ReplicatedClaims %q: %v, want an error naming the field", level, err)
		}
	}
	c, err := (Config{ReplicatedClaims: "on"}).withDefaults()
	if err != nil || c.ReplicatedClaimTimeout != DefaultReplicatedClaimTimeout {
		t.Errorf("default timeout %s, %v", c.ReplicatedClaimTimeout, err)
	}
	if _, err := (Config{ReplicatedClaimTimeout: -time.Second}).withDefaults(); err == nil || !strings.Contains(err.Error(), "ReplicatedClaimTimeout") {
		t.Errorf("negative timeout: %v", err)
	}
}

func TestSyncClauseInClaimStatements(t *testing.T) {
	off := buildStatements(`"t"`, true, "")
	on := buildStatements(`"t"`, true, "remote_apply")
	for name, pair := range map[string][2]string{
		"claim": {off.claim, on.claim}, "insertOnly": {off.insertOnly, on.insertOnly}, "reclaim": {off.reclaim, on.reclaim},
		"touchOwn": {off.touchOwn, on.touchOwn}, "resolveClaim": {off.resolveClaim, on.resolveClaim},
	} {
		if strings.Contains(pair[0], "set_config") {
			t.Errorf("%s without replicated claims sets a setting: %s", name, pair[0])
		}
		if !strings.Contains(pair[1], "set_config('synchronous_commit', 'remote_apply', true)") ||
			!strings.Contains(pair[1], "set_config('client_min_messages', 'warning', true)") {
			t.Errorf("%s with replicated claims does not set the level: %s", name, pair[1])
		}
	}
	for name, q := range map[string]string{"finishTerminal": on.finishTerminal, "finishKnown": on.finishKnown, "release": on.release,
		"resolveUpdate": on.resolveUpdate, "heartbeat": on.heartbeat} {
		if strings.Contains(q, "set_config") {
			t.Errorf("%s waits for the standbys; only claims should: %s", name, q)
		}
	}
}
