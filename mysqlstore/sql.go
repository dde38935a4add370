package mysqlstore

// columns is the record column list, in the order scanRecord reads them.
const columns = "scope, `key`, fingerprint, state, fence, attempt_id, intent, result, mark, " +
	"created_at, lease_until, completed_at, expires_at"

// statements holds the SQL for one table, built once per store.
type statements struct {
	insert      string
	reclaim     string
	get         string
	getShared   string // locking read after a duplicate, inside a transaction
	getExcl     string // locking read before a write, inside a transaction
	finish      string
	finishOne   string // terminal outcome and read-back in one round trip
	finishKnown string // terminal outcome over a record known from the claim
	unknownOne  string // unknown outcome and read-back in one round trip
	heartbeat   string
	release     string
	resolveTo   string
	resolveDel  string
	setMark     string
	sweep       string
	sweepNoLim  string
	listColumns string
}

func buildStatements(table string) statements {
	t := "`" + table + "`"
	// up is how every UPDATE by primary key begins. USE INDEX (PRIMARY)
	// keeps the optimizer from estimating the secondary indexes that the
	// WHERE clause also mentions (state, created_at, expires_at): for a
	// row named by its whole primary key those estimates are index dives
	// that change nothing but cost server CPU on every statement. The
	// hint affects only the access path, never which rows match.
	up := "UPDATE " + t + " USE INDEX (PRIMARY) SET "
	get := "SELECT " + columns + " FROM " + t + " WHERE scope = ? AND `key` = ?"
	return statements{
		// A plain INSERT: the primary key decides, a duplicate fails with
		// 1062 and writes nothing.
		insert: "INSERT INTO " + t + " (" + columns + ") VALUES (?, ?, ?, 'in_progress', 1, ?, ?, NULL, '', ?, ?, NULL, NULL)",
		// Re-claim an expired terminal record: the expiry is checked in
		// the same statement, against the fence that was read.
		reclaim: up + "fingerprint = ?, state = 'in_progress', fence = fence + 1, attempt_id = ?, " +
			"intent = ?, result = NULL, mark = '', created_at = ?, lease_until = ?, completed_at = NULL, expires_at = NULL " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND state IN ('succeeded', 'failed') AND expires_at <= ?",
		get:       get,
		getShared: get + " LOCK IN SHARE MODE",
		getExcl:   get + " FOR UPDATE",
		finish: up + "state = ?, result = ?, completed_at = ?, expires_at = ? " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? AND state = ?",
		// Finish in one round trip (multiStatements, on Open's pool): read
		// the record, UPDATE it if fence, attempt and state allow, and
		// report ROW_COUNT(). The read comes first, as in the two-trip
		// path, so a record that moves on after the write cannot hide it.
		finishOne: get + "; " + up + "state = ?, result = ?, completed_at = ?, expires_at = ? " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? AND state IN ('in_progress', 'unknown'); " +
			"SELECT ROW_COUNT()",
		// Finish when the caller holds the claim: the UPDATE also checks
		// every column it does not write against the claim, so a changed
		// row means the record is the claim with the written fields over
		// it, and nothing needs to be read back.
		finishKnown: up + "state = ?, result = ?, completed_at = ?, expires_at = ? " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? AND state IN ('in_progress', 'unknown') " +
			"AND fingerprint = ? AND intent <=> ? AND mark = ? AND created_at = ? AND lease_until <=> ?",
		unknownOne: get + "; " + up + "state = 'unknown', completed_at = ? " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? AND state = 'in_progress'; " +
			"SELECT ROW_COUNT()",
		heartbeat: up + "lease_until = ? " +
			"WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? AND state = 'in_progress'",
		release: "DELETE FROM " + t + " WHERE scope = ? AND `key` = ? AND fence = ? AND attempt_id = ? " +
			"AND state IN ('in_progress', 'unknown')",
		resolveTo: up + "state = ?, fence = fence + 1, attempt_id = ?, result = ?, " +
			"lease_until = ?, completed_at = ?, expires_at = ? WHERE scope = ? AND `key` = ? AND fence = ? AND state = ?",
		resolveDel: "DELETE FROM " + t + " WHERE scope = ? AND `key` = ? AND fence = ? AND state = ?",
		setMark:    up + "mark = ? WHERE scope = ? AND `key` = ? AND fence = ?",
		// ORDER BY the expires_at index (which carries the primary key)
		// makes the batch deterministic, as statement-based replication
		// requires of DELETE … LIMIT.
		sweep:       "DELETE FROM " + t + " WHERE state IN ('succeeded', 'failed') AND expires_at <= ? ORDER BY expires_at, scope, `key` LIMIT ?",
		sweepNoLim:  "DELETE FROM " + t + " WHERE state IN ('succeeded', 'failed') AND expires_at <= ?",
		listColumns: "SELECT " + columns + " FROM " + t,
	}
}
