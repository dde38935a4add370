package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
)

var _ idem.ReplicationChecker = (*Store)(nil)

// What a failover of MySQL or MariaDB keeps, by topology:
//
//   - A standalone server (no replica connected, not a replica itself)
//     has nothing to fail over to: no finding.
//   - Asynchronous replication: the primary acknowledges a commit before
//     any replica has it; a replica promoted after the primary dies lacks
//     the last claims, and their retries run the effect again. Refused.
//   - Semi-synchronous replication with rpl_semi_sync_master_wait_point =
//     AFTER_SYNC: the commit waits, before the storage engine makes it
//     visible to anyone, until one replica has written it to its relay
//     log. Safe, with two warnings: after rpl_semi_sync_master_timeout
//     without an acknowledgement the primary commits and acknowledges
//     anyway and carries on asynchronously (Rpl_semi_sync_master_status
//     turns OFF, which is refused), and with several replicas only one
//     acknowledged, so the failover must promote the most advanced one.
//   - AFTER_COMMIT (MariaDB's default): the commit is visible to every
//     session before the replica acknowledged it. The session that
//     committed still waits, but a claim whose answer was lost (the
//     connection dropped during the wait) is found by the engine's retry
//     as its own claim, which runs the effect on a claim no replica has.
//     Refused; AFTER_SYNC costs the same wait.
//   - Galera: a commit is certified and ordered on every node of the
//     Primary component before the client hears of it, so a failover to
//     any node of that component keeps it. Safe on a Synced node of a
//     Primary component; a non-Primary node, or sessions that do not
//     replicate (wsrep_on = OFF), are refused.
//
// A read-only server, or one replicating from another (a replica), is
// refused outright: a claim written there is not on the primary.

// The variables CheckReplication reads. A name the server does not have
// is absent from SHOW VARIABLES: MySQL has no wsrep_*, MariaDB no
// super_read_only, and MySQL's semisync plugin from 8.0.26 says
// source/replica where MariaDB and older MySQL say master/slave.
var (
	replGlobalVars = []string{
		"version", "version_comment", "log_bin", "read_only", "super_read_only", "innodb_read_only",
		"rpl_semi_sync_master_enabled", "rpl_semi_sync_master_wait_point", "rpl_semi_sync_master_timeout",
		"rpl_semi_sync_master_wait_no_slave", "rpl_semi_sync_master_wait_for_slave_count",
		"rpl_semi_sync_source_enabled", "rpl_semi_sync_source_wait_point", "rpl_semi_sync_source_timeout",
		"rpl_semi_sync_source_wait_no_replica", "rpl_semi_sync_source_wait_for_replica_count",
		"wsrep_on", "wsrep_provider", "wsrep_cluster_address", "wsrep_sync_wait",
		"group_replication_group_name",
	}
	replSessionVars = []string{"sql_log_bin", "wsrep_on", "wsrep_sync_wait"}
	replStatusVars  = []string{
		"Rpl_semi_sync_master_status", "Rpl_semi_sync_master_clients",
		"Rpl_semi_sync_source_status", "Rpl_semi_sync_source_clients",
		"Slaves_connected", "Slaves_running",
		"wsrep_cluster_size", "wsrep_cluster_status", "wsrep_local_state_comment", "wsrep_ready",
	}
)

// replFacts is what CheckReplication read; judgeReplication decides on it
// alone, so that every topology can be judged in a unit test.
type replFacts struct {
	vars    map[string]string // SHOW GLOBAL VARIABLES, by lower-case name
	session map[string]string // SHOW SESSION VARIABLES, by lower-case name
	status  map[string]string // SHOW GLOBAL STATUS, by lower-case name
	// replicas is the number of replicas connected to this server (binlog
	// dump threads), or -1 when it could not be read.
	replicas     int
	replicaHosts []string // host:port of each, when SHOW REPLICA HOSTS could be read
	// sources are this server's own replication channels: non-empty on a
	// replica.
	sources []replSource
	// unreadable are warnings for what could not be read.
	unreadable []idem.Finding
}

// replSource is one channel of SHOW REPLICA STATUS.
type replSource struct {
	name     string // channel name, "" for the default one
	host     string // the source's host:port
	io, sqlT string // Slave_IO_Running, Slave_SQL_Running: Yes, No, Connecting
	// counted is set for a channel known only from the Slaves_running
	// status counter (SHOW REPLICA STATUS not readable): how many run.
	counted int
}

func (r replSource) running() bool {
	return strings.EqualFold(r.io, "Yes") || strings.EqualFold(r.io, "Connecting") || strings.EqualFold(r.sqlT, "Yes")
}

// CheckReplication reads how the server replicates and judges whether a
// claim it acknowledged survives a failover (see [idem.ReplicationChecker]).
//
// It reads read_only, super_read_only (MySQL) and innodb_read_only; SHOW
// REPLICA STATUS (a replica is refused); the replicas connected to this
// server (MariaDB's Slaves_connected status, or SHOW REPLICAS); the
// semi-synchronous settings and status (rpl_semi_sync_master_* on MariaDB
// and MySQL's older plugin, rpl_semi_sync_source_* on MySQL 8.0.26+); the
// session's sql_log_bin; and Galera's wsrep_on (global and session),
// wsrep_cluster_status, wsrep_local_state_comment, wsrep_cluster_size and
// wsrep_ready. Variables and status need no privilege. On MySQL, listing
// replicas needs REPLICATION SLAVE and SHOW REPLICA STATUS needs
// REPLICATION CLIENT; without them the finding is a warning that says
// so. On MariaDB the status counters stand in for both.
//
// It sees replicas that are connected now: a replica that is down or
// disconnected at the time of the check is not counted, and neither
// idem nor the primary can tell what a failover to it would lose.
func (s *Store) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if err := s.usable(); err != nil {
		return idem.Replication{}, err
	}
	f, err := s.readReplication(ctx)
	if err != nil {
		return idem.Replication{}, s.wrap("check replication", err)
	}
	return judgeReplication(f), nil
}

// readReplication gathers the facts judgeReplication needs.
func (s *Store) readReplication(ctx context.Context) (replFacts, error) {
	var f replFacts
	var err error
	if f.vars, err = s.showVariables(ctx, "SHOW GLOBAL VARIABLES", replGlobalVars); err != nil {
		return f, err
	}
	if f.session, err = s.showVariables(ctx, "SHOW SESSION VARIABLES", replSessionVars); err != nil {
		return f, err
	}
	if f.status, err = s.showVariables(ctx, "SHOW GLOBAL STATUS", replStatusVars); err != nil {
		return f, err
	}
	_, mariadb := f.status["slaves_connected"]
	f.replicas = -1
	switch {
	case mariadb:
		// MariaDB counts the binlog dump threads without a privilege;
		// the host list (REPLICATION MASTER ADMIN) is only a detail.
		f.replicas = atoi(f.status["slaves_connected"])
		if f.replicas > 0 {
			if rows, err := s.queryMaps(ctx, "SHOW SLAVE HOSTS"); err == nil {
				f.replicaHosts = replicaHosts(rows)
			}
		}
	case isOff(f.vars["log_bin"]):
		f.replicas = 0 // no binary log, no binlog replica
	default:
		rows, err := s.queryFirst(ctx, "SHOW REPLICAS", "SHOW SLAVE HOSTS")
		switch {
		case err == nil:
			f.replicas, f.replicaHosts = len(rows), replicaHosts(rows)
		case unreadable(err):
			f.unreadable = append(f.unreadable, idem.Finding{
				Setting: "SHOW REPLICAS", Value: "not readable",
				Problem:  "idem cannot list the replicas connected to this server (" + err.Error() + "), so it cannot tell whether they replicate asynchronously",
				Fix:      "GRANT REPLICATION SLAVE ON *.* TO the store's user",
				Severity: idem.SeverityWarning,
			})
		default:
			return f, err
		}
	}
	stmts := []string{"SHOW REPLICA STATUS", "SHOW SLAVE STATUS"}
	if mariadb {
		stmts = []string{"SHOW ALL SLAVES STATUS"} // every named connection, not only the default one
	}
	rows, err := s.queryFirst(ctx, stmts...)
	switch {
	case err == nil:
		f.sources = replSources(rows)
	case unreadable(err) && mariadb:
		// SLAVE MONITOR is missing; Slaves_running still counts the
		// channels that run, which is what refuses a replica.
		if n := atoi(f.status["slaves_running"]); n > 0 {
			f.sources = append(f.sources, replSource{counted: n, io: "Yes", sqlT: "Yes"})
		}
	case unreadable(err):
		f.unreadable = append(f.unreadable, idem.Finding{
			Setting: "SHOW REPLICA STATUS", Value: "not readable",
			Problem:  "idem cannot tell whether this server is itself a replica (" + err.Error() + ")",
			Fix:      "GRANT REPLICATION CLIENT ON *.* TO the store's user",
			Severity: idem.SeverityWarning,
		})
	default:
		return f, err
	}
	return f, nil
}

// showVariables runs stmt (SHOW … VARIABLES or STATUS) for the names
// given, and returns the values by lower-case name. Names the server does
// not have are absent.
func (s *Store) showVariables(ctx context.Context, stmt string, names []string) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, stmt+" WHERE Variable_name IN ('"+strings.Join(names, "', '")+"')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := make(map[string]string, len(names))
	for rows.Next() {
		var name, value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		m[strings.ToLower(name.String)] = value.String
	}
	return m, rows.Err()
}

// queryFirst runs the first of stmts the server understands (a syntax
// error moves on to the next: SHOW REPLICAS is MySQL 8.0.22+, SHOW SLAVE
// HOSTS is gone from 8.4) and returns its rows.
func (s *Store) queryFirst(ctx context.Context, stmts ...string) ([]map[string]string, error) {
	var err error
	for _, stmt := range stmts {
		var rows []map[string]string
		rows, err = s.queryMaps(ctx, stmt)
		if mysqlErrno(err) != erParse {
			return rows, err
		}
	}
	return nil, err
}

// queryMaps returns stmt's rows as maps by column name.
func (s *Store) queryMaps(ctx context.Context, stmt string) ([]map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, stmt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]string, len(cols))
		for i, c := range cols {
			m[c] = vals[i].String
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Server errors the check reads as "cannot tell" rather than failing.
const (
	erParse                = 1064 // ER_PARSE_ERROR: a statement this version lacks
	erSpecificAccessDenied = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR: a privilege is missing
	erDBAccessDenied       = 1044 // ER_DBACCESS_DENIED_ERROR
	erTableAccessDenied    = 1142 // ER_TABLEACCESS_DENIED_ERROR
	erWsrepNotReady        = 1047 // ER_UNKNOWN_COM_ERROR: a Galera node that is not ready
)

func unreadable(err error) bool {
	switch mysqlErrno(err) {
	case erSpecificAccessDenied, erDBAccessDenied, erTableAccessDenied, erWsrepNotReady:
		return true
	}
	return false
}

// replicaHosts reads host:port from SHOW REPLICAS / SHOW SLAVE HOSTS rows.
func replicaHosts(rows []map[string]string) []string {
	var hosts []string
	for _, r := range rows {
		h := r["Host"]
		if h == "" {
			h = "server_id " + first(r, "Server_Id", "Server_id")
		}
		if p := r["Port"]; p != "" && p != "0" {
			h += ":" + p
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// replSources reads SHOW REPLICA STATUS / SHOW ALL SLAVES STATUS rows.
func replSources(rows []map[string]string) []replSource {
	var out []replSource
	for _, r := range rows {
		src := replSource{
			name: first(r, "Connection_name", "Channel_Name", "Channel_name"),
			host: first(r, "Source_Host", "Master_Host"),
			io:   first(r, "Replica_IO_Running", "Slave_IO_Running"),
			sqlT: first(r, "Replica_SQL_Running", "Slave_SQL_Running"),
		}
		if p := first(r, "Source_Port", "Master_Port"); p != "" {
			src.host += ":" + p
		}
		out = append(out, src)
	}
	return out
}

// first returns the value of the first of names that r has.
func first(r map[string]string, names ...string) string {
	for _, n := range names {
		if v, ok := r[n]; ok {
			return v
		}
	}
	return ""
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// isOn reads a boolean variable: ON, 1, YES (case-insensitive).
func isOn(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "ON", "1", "YES", "TRUE":
		return true
	}
	return false
}

// isOff reads a boolean variable that is set: OFF, 0, NO.
func isOff(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "OFF", "0", "NO", "FALSE":
		return true
	}
	return false
}

// semiSync is the semi-synchronous replication a primary runs, under the
// names this server uses (rpl_semi_sync_master_* or _source_*).
type semiSync struct {
	loaded                bool // the server has the variables at all
	enabledVar, enabled   string
	waitPointVar, point   string
	timeoutVar, timeout   string
	noReplicaVar, noRepl  string
	countVar, count       string
	statusVar, status     string
	clientsVar            string
	clients               int
	replicaVar, ioRestart string // the replica side, for fixes
}

// readSemiSync reads the variables under the names the server has; a
// server that has neither (MySQL without the plugin) is named as MySQL
// 8.0.26+ names it.
func readSemiSync(f replFacts, product string) semiSync {
	src := "master"
	if _, ok := f.vars["rpl_semi_sync_source_enabled"]; ok {
		src = "source"
	} else if _, ok := f.vars["rpl_semi_sync_master_enabled"]; !ok && product == "MySQL" {
		src = "source"
	}
	pick := func(m map[string]string, source, master string) (string, string) {
		name := master
		if src == "source" {
			name = source
		}
		return name, m[strings.ToLower(name)]
	}
	var s semiSync
	s.enabledVar, s.enabled = pick(f.vars, "rpl_semi_sync_source_enabled", "rpl_semi_sync_master_enabled")
	_, s.loaded = f.vars[s.enabledVar]
	s.waitPointVar, s.point = pick(f.vars, "rpl_semi_sync_source_wait_point", "rpl_semi_sync_master_wait_point")
	s.timeoutVar, s.timeout = pick(f.vars, "rpl_semi_sync_source_timeout", "rpl_semi_sync_master_timeout")
	s.noReplicaVar, s.noRepl = pick(f.vars, "rpl_semi_sync_source_wait_no_replica", "rpl_semi_sync_master_wait_no_slave")
	s.countVar, s.count = pick(f.vars, "rpl_semi_sync_source_wait_for_replica_count", "rpl_semi_sync_master_wait_for_slave_count")
	s.statusVar, s.status = pick(f.status, "Rpl_semi_sync_source_status", "Rpl_semi_sync_master_status")
	var clients string
	s.clientsVar, clients = pick(f.status, "Rpl_semi_sync_source_clients", "Rpl_semi_sync_master_clients")
	s.clients = atoi(clients)
	if src == "source" {
		s.replicaVar, s.ioRestart = "rpl_semi_sync_replica_enabled", "STOP REPLICA IO_THREAD; START REPLICA IO_THREAD"
	} else {
		s.replicaVar, s.ioRestart = "rpl_semi_sync_slave_enabled", "STOP SLAVE IO_THREAD; START SLAVE IO_THREAD"
	}
	return s
}

// acks is how many replicas acknowledge each commit: 1 on MariaDB, the
// wait-for count on MySQL.
func (s semiSync) acks() int {
	if n := atoi(s.count); n > 0 {
		return n
	}
	return 1
}

// judgeReplication turns what CheckReplication read into a topology and
// findings. See the comment at the top of this file for what each
// topology keeps in a failover.
func judgeReplication(f replFacts) idem.Replication {
	var (
		topo     []string
		findings []idem.Finding
	)
	refuse := func(setting, value, problem, fix string) {
		findings = append(findings, idem.Finding{Setting: setting, Value: value, Problem: problem, Fix: fix, Severity: idem.SeverityRefuse})
	}
	warn := func(setting, value, problem, fix string) {
		findings = append(findings, idem.Finding{Setting: setting, Value: value, Problem: problem, Fix: fix, Severity: idem.SeverityWarning})
	}
	product := "MySQL"
	if strings.Contains(f.vars["version"], "MariaDB") || strings.Contains(f.vars["version_comment"], "MariaDB") {
		product = "MariaDB"
	}

	// A read-only server or a replica: a claim written there is not on
	// the primary, whatever else is true.
	readOnly := false
	for _, v := range []string{"super_read_only", "read_only"} {
		if val, ok := f.vars[v]; ok && !isOff(val) && val != "" {
			refuse(v, val,
				"the server is read-only, as a replica or a demoted primary is: a claim written here by a user allowed to write anyway is not on the primary, which can decide the same key again",
				"point idem at the primary (the writable server)")
			readOnly = true
			break
		}
	}
	if isOn(f.vars["innodb_read_only"]) {
		refuse("innodb_read_only", f.vars["innodb_read_only"],
			"InnoDB refuses every write: no claim can be made here",
			"point idem at a writable primary")
		readOnly = true
	}
	if readOnly {
		topo = append(topo, "read-only server")
	}
	for _, src := range f.sources {
		from := src.host
		if from == "" || from == ":" {
			from = "a source"
		}
		ch := ""
		if src.name != "" {
			ch = " (channel " + src.name + ")"
		}
		value := "replicating from " + from + ch + fmt.Sprintf(", IO %s, SQL %s", orDash(src.io), orDash(src.sqlT))
		if src.counted > 0 {
			from = "a source"
			value = fmt.Sprintf("Slaves_running = %d (SHOW REPLICA STATUS not readable)", src.counted)
		}
		if src.running() {
			topo = append(topo, "replica of "+from+ch)
			refuse("SHOW REPLICA STATUS", value,
				"this server is a replica: a claim written here is not on its primary, which can decide the same key again, and rows replicated from the primary can overwrite it",
				"point idem at the primary; a promoted replica stops replicating first (STOP REPLICA; RESET REPLICA ALL; SET GLOBAL read_only = OFF)")
			continue
		}
		warn("SHOW REPLICA STATUS", "stopped "+value,
			"a replication channel is configured though stopped: START REPLICA would make this server a replica again, applying its old primary's writes over the claims made here",
			"on a promoted replica, RESET REPLICA ALL")
	}

	// Galera: certification makes a commit exist on every node of the
	// Primary component before the client hears of it.
	galera := isOn(f.vars["wsrep_on"]) && !strings.EqualFold(strings.TrimSpace(f.vars["wsrep_provider"]), "none")
	if galera {
		state := f.status["wsrep_local_state_comment"]
		status := f.status["wsrep_cluster_status"]
		size := atoi(f.status["wsrep_cluster_size"])
		t := fmt.Sprintf("Galera node (%s) in a %s component of %d node%s", orDash(state), orDash(status), size, plural(size))
		if v, ok := f.session["wsrep_sync_wait"]; ok {
			t += ", wsrep_sync_wait=" + v
		}
		topo = append(topo, t)
		if v, ok := f.session["wsrep_on"]; ok && isOff(v) {
			refuse("wsrep_on (session)", v,
				"the store's sessions do not replicate their writes to the other Galera nodes: a claim made here is missing on every other node, which can decide the same key again",
				"remove wsrep_on=OFF from the DSN or init_connect")
		}
		switch {
		case !strings.EqualFold(status, "Primary"):
			refuse("wsrep_cluster_status", orDash(status),
				"this node is not in the Primary component (it lost quorum): it cannot commit, and a component forced into Primary (pc.bootstrap) while another still runs would let each decide the same key",
				"connect idem to a node of the Primary component; restore quorum (bring nodes back, or add garbd), never bootstrap a second Primary component")
		case isOff(f.status["wsrep_ready"]):
			refuse("wsrep_ready", f.status["wsrep_ready"],
				"the node does not accept queries (it is joining the cluster or receiving a state transfer)",
				"wait until wsrep_ready = ON, or point idem at a Synced node")
		case !strings.EqualFold(state, "Synced"):
			warn("wsrep_local_state_comment", orDash(state),
				"the node is not Synced: its writes are still certified across the cluster, but it applies the other nodes' writes late, so it can answer reads with an older record",
				"point idem at a Synced node")
		}
		if nodes := gcommNodes(f.vars["wsrep_cluster_address"]); size == 1 && nodes > 1 && strings.EqualFold(status, "Primary") {
			warn("wsrep_cluster_size", "1",
				fmt.Sprintf("this node is a Primary component alone though wsrep_cluster_address names %d nodes: the others left, or it was bootstrapped on its own; if another component was bootstrapped too, each decides keys the other never sees", nodes),
				"bring the other nodes back into this component; never bootstrap while another component runs")
		}
	}

	// Binlog replicas of this server.
	semi := readSemiSync(f, product)
	n := f.replicas // -1: unknown
	if semi.clients > 0 && semi.clients > n {
		n = semi.clients // a semi-synchronous client is a connected replica
	}
	hosts := ""
	if len(f.replicaHosts) > 0 {
		hosts = " (" + strings.Join(f.replicaHosts, ", ") + ")"
	}
	switch {
	case n > 0:
		t := fmt.Sprintf("primary with %d replica%s%s", n, plural(n), hosts)
		what := fmt.Sprintf("%d replica%s%s", n, plural(n), hosts)
		if v, ok := f.session["sql_log_bin"]; ok && isOff(v) {
			refuse("sql_log_bin (session)", v,
				"the store's sessions do not write the binary log: no replica receives a claim, and a failover loses every one",
				"remove sql_log_bin=0 from the DSN or init_connect")
		}
		enableFix := fmt.Sprintf("semi-synchronous replication: on the primary SET GLOBAL %s = ON, %s = AFTER_SYNC, and %s (milliseconds) longer than a failover takes (see docs/replication.md); on each replica SET GLOBAL %s = ON; %s. Or run a Galera cluster",
			semi.enabledVar, semi.waitPointVar, semi.timeoutVar, semi.replicaVar, semi.ioRestart)
		if !semi.loaded && product == "MySQL" {
			enableFix = "INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so' (and rpl_semi_sync_replica on the replicas), then " + enableFix
		}
		timeout := semi.timeout
		if timeout == "" {
			timeout = "?"
		}
		switch {
		case !isOn(semi.enabled):
			topo = append(topo, t+", asynchronous")
			refuse(semi.enabledVar, orValue(semi.enabled, "OFF (not loaded)"),
				"asynchronous replication to "+what+": the primary acknowledges a commit before any replica has it, so a failover to a replica loses the last claims and their retries run the effect again",
				enableFix)
		case !isOn(semi.status):
			topo = append(topo, t+", semi-synchronous fallen back to asynchronous")
			refuse(semi.statusVar, orValue(semi.status, "OFF"),
				"semi-synchronous replication is enabled but has fallen back to asynchronous: a commit waited "+semi.timeoutVar+" ("+timeout+" ms) for an acknowledgement that did not come, and since then the primary acknowledges commits no replica has; a failover now loses claims",
				"find why no replica acknowledges ("+semi.replicaVar+" on the replicas, their IO threads, the network); the primary switches back ON once a semi-synchronous replica catches up")
		case semi.clients == 0:
			topo = append(topo, t+", none semi-synchronous")
			refuse(semi.clientsVar, "0",
				what+" connected but none acknowledges commits ("+semi.replicaVar+" = OFF on them, or their IO thread started before it was set): each commit waits "+semi.timeoutVar+" and then replication falls back to asynchronous",
				"on each replica SET GLOBAL "+semi.replicaVar+" = ON; "+semi.ioRestart)
		case !strings.EqualFold(semi.point, "AFTER_SYNC"):
			topo = append(topo, t+", semi-synchronous "+orDash(semi.point))
			refuse(semi.waitPointVar, orDash(semi.point),
				"the primary commits, shows the commit to every session, and only then waits for a replica: a claim whose answer was lost (the connection dropped while the primary waited) is found by the engine's retry as its own and runs the effect though no replica has it; a failover then loses it and the next retry runs the effect again. With AFTER_SYNC no session sees a commit before a replica has it",
				"SET GLOBAL "+semi.waitPointVar+" = AFTER_SYNC (and in the server's configuration); it costs the same wait")
		default:
			topo = append(topo, fmt.Sprintf("%s, semi-synchronous AFTER_SYNC (%d acknowledging, %s %s ms)", t, semi.clients, semi.timeoutVar, timeout))
			warn(semi.timeoutVar, timeout,
				"a commit that waits this many milliseconds without a replica's acknowledgement is committed and acknowledged anyway, and the primary goes on asynchronously ("+semi.statusVar+" = OFF) until a replica catches up: a failover before then loses the claims acknowledged meanwhile",
				"a timeout longer than any failover decision, so that a primary without its replica stops acknowledging claims (idem answers 503) instead of going on alone; watch "+semi.statusVar+" (idem refuses it OFF at start and in idem doctor)")
			if isOff(semi.noRepl) {
				warn(semi.noReplicaVar, semi.noRepl,
					"when no semi-synchronous replica is connected the primary does not wait at all: commits are asynchronous at once",
					"SET GLOBAL "+semi.noReplicaVar+" = ON")
			}
			if n > semi.acks() {
				warn("semi-synchronous replicas", fmt.Sprintf("%d replicas, %d acknowledgement%s per commit", n, semi.acks(), plural(semi.acks())),
					"a commit waits for the acknowledgement of one replica, not all: a failover that promotes another one (behind, or not semi-synchronous) loses the claims it had not received",
					"let the failover promote the most advanced replica (MaxScale's and Orchestrator's do: the highest GTID received), or keep one replica")
			}
		}
	case n < 0:
		topo = append(topo, "primary, replicas unknown")
	case len(topo) == 0:
		t := "standalone " + product
		if v := f.vars["version"]; v != "" {
			t += " " + strings.SplitN(v, "-", 2)[0]
		}
		t += ", no replica connected"
		if isOff(f.vars["log_bin"]) {
			t += " (binary log off)"
		}
		topo = append(topo, t)
	}

	if g := f.vars["group_replication_group_name"]; g != "" {
		topo = append(topo, "MySQL Group Replication group "+g)
		warn("group_replication_group_name", g,
			"MySQL Group Replication: idem does not judge it; a primary failover keeps acknowledged claims only if the new primary applies its backlog before accepting writes",
			"group_replication_consistency = BEFORE_ON_PRIMARY_FAILOVER or stronger; see docs/replication.md")
	}
	findings = append(findings, f.unreadable...)
	return idem.Replication{Topology: strings.Join(topo, "; "), Findings: findings}
}

// gcommNodes counts the nodes a gcomm:// cluster address names.
func gcommNodes(addr string) int {
	addr = strings.TrimSpace(addr)
	addr = strings.TrimPrefix(addr, "gcomm://")
	if i := strings.IndexByte(addr, '?'); i >= 0 {
		addr = addr[:i]
	}
	if addr == "" {
		return 0
	}
	return len(strings.Split(addr, ","))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string { return orValue(s, "-") }

func orValue(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
