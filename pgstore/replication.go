package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

var _ idem.ReplicationChecker = (*Store)(nil)

// CheckReplication reads, as this store's sessions see them, whether a
// claim it acknowledges survives a failover to a standby, and implements
// [idem.ReplicationChecker]:
//   - a server in recovery (a standby) or read-only sessions: refused, no
//     claim can be written;
//   - standbys connected (pg_stat_replication, physical replication only)
//     with synchronous_standby_names empty: asynchronous replication, a
//     failover loses the claims the standby had not received (refused);
//   - synchronous_standby_names set, but claims committing at
//     synchronous_commit off or local (Config.ReplicatedClaims unset and
//     the session's level below remote_write): refused likewise;
//   - claims at remote_write, asynchronous or potential standbys beside
//     the synchronous ones, quorum commit, no synchronous standby
//     connected, an inactive physical replication slot with no standby
//     connected, or standbys whose state the role may not see (a role
//     without pg_monitor reads NULLs in pg_stat_replication): warnings.
//
// A server with no standby and no synchronous_standby_names is standalone:
// no finding. Replication the server cannot see (a managed service whose
// storage replicates below PostgreSQL) is not judged.
func (s *Store) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if s.closed.Load() {
		return idem.Replication{}, errClosed("check replication")
	}
	var st replState
	st.claimLevel = s.cfg.ReplicatedClaims
	err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),
		current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
		(SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical'),
		(SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical' AND NOT active)`).
		Scan(&st.inRecovery, &st.readOnly, &st.syncNames, &st.sessionCommit, &st.physicalSlots, &st.inactiveSlots)
	if err != nil {
		return idem.Replication{}, wrap("check replication", err)
	}
	if !st.inRecovery {
		if st.standbys, err = s.readStandbys(ctx); err != nil {
			return idem.Replication{}, wrap("check replication", err)
		}
	}
	return judgeReplication(st), nil
}

// readStandbys reads pg_stat_replication, leaving out the senders of
// logical replication (a slot of type logical) and base backups.
func (s *Store) readStandbys(ctx context.Context) ([]standby, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.application_name, r.state, r.sync_state,
		extract(epoch FROM r.flush_lag)::float8, extract(epoch FROM r.replay_lag)::float8,
		(pg_current_wal_lsn() - r.flush_lsn)::float8
	FROM pg_stat_replication r
	WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots l WHERE l.active_pid = r.pid AND l.slot_type = 'logical')
		AND r.state IS DISTINCT FROM 'backup'
	ORDER BY r.application_name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []standby
	for rows.Next() {
		var sb standby
		var name, state, syncState *string
		var flushLag, replayLag, behind *float64
		if err := rows.Scan(&name, &state, &syncState, &flushLag, &replayLag, &behind); err != nil {
			return nil, err
		}
		sb.name, sb.state, sb.syncState = deref(name), deref(state), deref(syncState)
		sb.hidden = state == nil && syncState == nil
		if flushLag != nil {
			sb.flushLag = time.Duration(*flushLag * float64(time.Second))
		}
		if replayLag != nil {
			sb.replayLag = time.Duration(*replayLag * float64(time.Second))
		}
		if behind != nil {
			sb.behindBytes = int64(*behind)
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// replState is what CheckReplication read.
type replState struct {
	inRecovery bool
	readOnly   string // transaction_read_only: on, off
	// syncNames is synchronous_standby_names; sessionCommit the
	// session's synchronous_commit; claimLevel Config.ReplicatedClaims
	// ("" = claims commit at sessionCommit).
	syncNames, sessionCommit, claimLevel string
	// physicalSlots counts physical replication slots, inactiveSlots
	// those with no standby streaming from them.
	physicalSlots, inactiveSlots int64
	standbys                     []standby
}

// standby is one row of pg_stat_replication.
type standby struct {
	name, state, syncState string
	// hidden: state and sync_state read NULL (a role without
	// pg_read_all_stats, which pg_monitor includes).
	hidden              bool
	flushLag, replayLag time.Duration
	behindBytes         int64
}

// claimCommit is the synchronous_commit level claims commit at.
func (st replState) claimCommit() string {
	if st.claimLevel != "" {
		return st.claimLevel
	}
	return st.sessionCommit
}

// waits reports whether a commit at level waits for synchronous standbys.
func waits(level string) bool {
	switch level {
	case "on", "remote_write", "remote_apply":
		return true
	}
	return false
}

// Fixes, as the findings print them.
const (
	fixReplicated = `set synchronous_standby_names on the primary (e.g. 'FIRST 1 (standby1)', ALTER SYSTEM SET … ; SELECT pg_reload_conf()) and make claims wait for it: replicated_claims=on in the idem DSN (pgstore Config.ReplicatedClaims = "on"), or synchronous_commit = on for idem's role`
	fixPromote    = "let the failover manager promote only a synchronous standby (Patroni: synchronous_mode), or name every standby in synchronous_standby_names with as many as there are (FIRST n / ANY n)"
)

// judgeReplication turns what CheckReplication read into findings.
func judgeReplication(st replState) idem.Replication {
	if st.inRecovery {
		return idem.Replication{Topology: "standby server (in recovery)", Findings: []idem.Finding{{
			Setting: "pg_is_in_recovery()", Value: "true",
			Problem:  "the store's server is a standby: it cannot record claims, and what it reads lags its primary",
			Fix:      "point the store at the primary; a multi-host DSN with target_session_attrs=read-write (postgres://u@a,b/db?target_session_attrs=read-write) finds it, also after a failover",
			Severity: idem.SeverityRefuse,
		}}}
	}
	var out []idem.Finding
	if st.readOnly == "on" {
		out = append(out, idem.Finding{
			Setting: "transaction_read_only", Value: "on",
			Problem:  "the store's sessions are read-only: no claim can be recorded",
			Fix:      "point the store at the primary, or set default_transaction_read_only = off for idem's role",
			Severity: idem.SeverityRefuse,
		})
	}
	level := st.claimCommit()
	c := countStandbys(st.standbys)
	topo := topology(len(st.standbys), c, level)
	switch {
	case len(st.standbys) == 0 && st.syncNames == "":
		topo = "standalone primary, no standby"
		if st.inactiveSlots > 0 {
			out = append(out, idem.Finding{
				Setting: "pg_replication_slots", Value: fmt.Sprintf("%d inactive physical slot(s)", st.inactiveSlots),
				Problem:  "a physical replication slot has no standby streaming from it: a standby that is disconnected is behind, and if it were promoted it would lack the claims it missed (asynchronous replication)",
				Fix:      "reconnect the standby and make claims wait for it (" + fixReplicated + "), or drop the slot if the standby is gone (SELECT pg_drop_replication_slot(name))",
				Severity: idem.SeverityWarning,
			})
			topo = "primary, no standby connected (" + strconv.FormatInt(st.inactiveSlots, 10) + " inactive replication slot)"
		}
	case st.syncNames == "":
		out = append(out, idem.Finding{
			Setting: "synchronous_standby_names", Value: "''",
			Problem:  "asynchronous replication: a failover to a standby loses claims it had not received, and their retries run the effect again (" + describeAll(st.standbys) + ")",
			Fix:      fixReplicated,
			Severity: idem.SeverityRefuse,
		})
	case !waits(level):
		out = append(out, idem.Finding{
			Setting: "synchronous_commit", Value: level,
			Problem:  "asynchronous replication: a failover to a standby loses claims it had not received — synchronous_standby_names is set ('" + st.syncNames + "') but claims commit at synchronous_commit=" + level + ", without waiting for the standby",
			Fix:      `replicated_claims=on in the idem DSN (pgstore Config.ReplicatedClaims = "on"), or synchronous_commit = on for idem's role (ALTER ROLE name SET synchronous_commit = on)`,
			Severity: idem.SeverityRefuse,
		})
	default:
		out = append(out, waitingFindings(st.syncNames, level, c)...)
	}
	return idem.Replication{Topology: topo, Findings: out}
}

// standbyCounts counts the standbys by sync_state.
type standbyCounts struct {
	sync, quorum, async, hidden int
	// asyncNames describes the asynchronous (or potential, or catching
	// up) standbys.
	asyncNames []string
}

func countStandbys(sbs []standby) standbyCounts {
	var c standbyCounts
	for _, sb := range sbs {
		switch {
		case sb.hidden:
			c.hidden++
		case sb.syncState == "sync":
			c.sync++
		case sb.syncState == "quorum":
			c.quorum++
		default: // async, potential, or a standby still catching up
			c.async++
			c.asyncNames = append(c.asyncNames, sb.describe())
		}
	}
	return c
}

// waitingFindings are the warnings about a setup whose claims wait for
// the synchronous standbys (synchronous_standby_names set, claims at
// level, which waits).
func waitingFindings(syncNames, level string, c standbyCounts) []idem.Finding {
	var out []idem.Finding
	warn := func(setting, value, problem, fix string) {
		out = append(out, idem.Finding{Setting: setting, Value: value, Problem: problem, Fix: fix, Severity: idem.SeverityWarning})
	}
	names := "'" + syncNames + "'"
	if level == "remote_write" {
		warn("synchronous_commit", level,
			"a claim is confirmed once the standby's operating system has it, before the standby flushes it: a crash of the standby's machine together with the primary's loses it",
			`replicated_claims=on (pgstore Config.ReplicatedClaims = "on") waits for the standby's flush`)
	}
	if c.hidden > 0 {
		warn("pg_stat_replication", "unreadable",
			fmt.Sprintf("the store's role cannot see the state of %d standby(s) (sync_state reads NULL without pg_monitor): which are synchronous is unknown", c.hidden),
			"GRANT pg_monitor TO the store's role")
	}
	if c.sync+c.quorum+c.hidden == 0 {
		warn("synchronous_standby_names", names,
			"no synchronous standby is connected: every claim waits for one, and fails closed (503) after replicated_claims_timeout",
			"connect a standby named in synchronous_standby_names (its primary_conninfo's application_name)")
	}
	if c.quorum > 0 {
		warn("synchronous_standby_names", names,
			"quorum commit (ANY n): a claim is confirmed by n of the standbys, and a failover to another one loses it",
			"let the failover manager promote the standby that received the most WAL (Patroni: synchronous_mode: quorum), or use FIRST n with n equal to the standbys' count")
	}
	if c.async > 0 {
		warn("synchronous_standby_names", names,
			"asynchronous standbys beside the synchronous ones ("+strings.Join(c.asyncNames, ", ")+"): a failover manager that promotes one of them loses the claims it had not received",
			fixPromote)
	}
	return out
}

// topology describes the primary and its standbys in a few words.
func topology(n int, c standbyCounts, level string) string {
	if n == 0 {
		return "primary, no standby connected (claims: synchronous_commit=" + level + ")"
	}
	var parts []string
	add := func(k int, what string) {
		if k > 0 {
			parts = append(parts, strconv.Itoa(k)+" "+what)
		}
	}
	add(c.sync, "synchronous")
	add(c.quorum, "quorum")
	add(c.async, "asynchronous")
	add(c.hidden, "unreadable")
	noun := " standby"
	if n > 1 {
		noun = " standbys"
	}
	return "primary with " + strings.Join(parts, " and ") + noun + " (claims: synchronous_commit=" + level + ")"
}

// describe names a standby, its sync_state and lag.
func (sb standby) describe() string {
	name := sb.name
	if name == "" {
		name = "(unnamed)"
	}
	if sb.hidden {
		return name + " (state unreadable)"
	}
	s := name + " " + sb.syncState
	if sb.state != "" && sb.state != "streaming" {
		s += ", " + sb.state
	}
	if sb.flushLag > 0 {
		s += ", flush lag " + sb.flushLag.Round(time.Millisecond).String()
	}
	if sb.behindBytes > 0 {
		s += fmt.Sprintf(", %d bytes behind", sb.behindBytes)
	}
	return s
}

func describeAll(sbs []standby) string {
	parts := make([]string, len(sbs))
	for i, sb := range sbs {
		parts[i] = sb.describe()
	}
	return "standbys: " + strings.Join(parts, "; ")
}
