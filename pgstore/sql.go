package pgstore

import "strings"

// columns is the record projection every statement returns, in the order
// scanRecord expects.
const columns = "scope, key, fingerprint, state, fence, attempt_id, intent, result, mark, created_at, lease_until, completed_at, expires_at"

// statements holds the SQL of every operation for one table. The hot-path
// statements (claim, reclaim, finish) use only INSERT … ON CONFLICT DO
// NOTHING, UPDATE/DELETE … RETURNING and data-modifying CTEs, which
// CockroachDB and YugabyteDB also accept; pg_notify is left out when
// notifications are disabled.
type statements struct {
	claim, insertOnly, reclaim    string
	finishTerminal, finishUnknown string
	finishKnown                   string
	// The three finishes with asyncClause, for Config.AsyncOutcomes
	// (never inside a caller's transaction).
	finishTerminalAsync, finishUnknownAsync, finishKnownAsync string
	release, heartbeat                                        string
	resolveUpdate, resolveDelete                              string
	setMark, get, list, sweep                                 string
	sweepUnbounded, markWaiting                               string
	sweepSince                                                string
	// touchOwn makes a claim's own row durable on the standbys (used only
	// with Config.ReplicatedClaims).
	touchOwn string
	// resolveClaim is resolveUpdate for a re-drive (to in_progress),
	// which waits for the standbys with Config.ReplicatedClaims.
	resolveClaim string
}

// buildStatements renders the statements for table (already quoted). With
// notify, the statements that record an outcome or delete a claim wake
// waiters: pg_notify runs once per row they actually changed, and inside a
// caller's transaction the notification is delivered only at commit. With
// a syncLevel (Config.ReplicatedClaims), the statements that write a claim
// carry syncClause, so that the transaction they commit in waits for the
// standbys at that level.
func buildStatements(table string, notify bool, syncLevel string) statements {
	sync := ""
	if syncLevel != "" {
		sync = " AND " + syncClause(syncLevel)
	}
	r := strings.NewReplacer("{T}", table, "{COLS}", columns, "{SYNC}", sync)
	insertOnly := `INSERT INTO {T} (scope, key, fingerprint, state, fence, attempt_id, intent, mark, created_at, lease_until)
VALUES ($1, $2, $3, 'p', 1, $4, $5, '', $6, $7)
ON CONFLICT (scope, key) DO NOTHING`
	resolveUpdate := `UPDATE {T} SET state = $5, fence = fence + 1, attempt_id = $6, result = $7,
	completed_at = $8, expires_at = $9, lease_until = $10
WHERE scope = $1 AND key = $2 AND state = ANY($3::"char"[]) AND ($4::bigint = 0 OR fence = $4){SYNC}
RETURNING {COLS}, `
	if syncLevel != "" {
		// The same insert, as a SELECT that can carry the condition.
		insertOnly = `INSERT INTO {T} (scope, key, fingerprint, state, fence, attempt_id, intent, mark, created_at, lease_until)
SELECT $1, $2, $3, 'p', 1, $4, $5, '', $6, $7 WHERE ` + syncClause(syncLevel) + `
ON CONFLICT (scope, key) DO NOTHING`
	}
	// notifyAt returns the wake-up expression taking its channel and payload
	// from the parameters $a and $b. It notifies only when a waiter flagged
	// the row (see markWaiting): a NOTIFY takes a database-wide lock through
	// commit, and paying it on every outcome would serialize all commits. It
	// yields a boolean so both variants scan the same way.
	notifyAt := func(a, b string) string {
		if !notify {
			return "false"
		}
		return "CASE WHEN waiting THEN pg_notify($" + a + "::text, $" + b + "::text) IS NULL ELSE false END"
	}
	// The finishes, each with {ASYNC} where Config.AsyncOutcomes puts
	// asyncClause.
	finishTerminal := `UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8, lease_until = NULL
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u'){ASYNC}
RETURNING {COLS}, ` + notifyAt("9", "10")
	finishKnown := `UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8, lease_until = NULL` + notifyInSet(notify, "14", "15") + `
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u')
	AND fingerprint = $9 AND intent IS NOT DISTINCT FROM $10 AND mark = $11 AND created_at IS NOT DISTINCT FROM $12
	AND lease_until IS NOT DISTINCT FROM $13{ASYNC}`
	finishUnknown := `UPDATE {T} SET state = 'u', completed_at = $5
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state = 'p'{ASYNC}
RETURNING {COLS}, ` + notifyAt("6", "7")
	return statements{
		// Return the existing row, or insert one; a replay is one index probe
		// and no write (the insert is not even attempted). When the insert
		// conflicts with a row committed after this statement's snapshot (it
		// waited for that inserter), neither branch returns a row: the
		// caller retries with a new snapshot (see Claim).
		claim: r.Replace(`WITH cur AS (
	SELECT {COLS}, false AS claimed FROM {T} WHERE scope = $1 AND key = $2
), ins AS (
	INSERT INTO {T} (scope, key, fingerprint, state, fence, attempt_id, intent, mark, created_at, lease_until)
	SELECT $1, $2, $3, 'p', 1, $4, $5, '', $6, $7 WHERE NOT EXISTS (SELECT 1 FROM cur){SYNC}
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING {COLS}, true AS claimed
)
SELECT * FROM cur
UNION ALL
SELECT * FROM ins`),

		// The first-time fast path: a plain insert decided by the primary
		// key, run as an Exec (alone, or in a group-commit batch, which
		// answers whether it inserted a row). No row inserted means the
		// key exists (or a concurrent inserter won); the caller then runs
		// the claim statement above, which reads the existing row and
		// handles the snapshot trap.
		insertOnly: r.Replace(insertOnly),

		// Take over an expired terminal record. Every condition that made it
		// reclaimable is re-checked here, against the fence that was read.
		reclaim: r.Replace(`UPDATE {T} SET fingerprint = $3, state = 'p', fence = fence + 1, attempt_id = $4,
	intent = $5, result = NULL, mark = '', created_at = $6, lease_until = $7, completed_at = NULL, expires_at = NULL, waiting = false
WHERE scope = $1 AND key = $2 AND fence = $8 AND state IN ('s', 'f') AND expires_at <= $6{SYNC}
RETURNING {COLS}`),

		// A claim that finds its own row (an earlier claim of the same
		// attempt committed, but its answer or its wait for the standbys
		// was lost) rewrites it unchanged: a write, so the transaction
		// commits a record and waits for the standbys, and a commit
		// confirmed by them confirms every earlier one, the row's own
		// included. (A transaction that only takes a transaction id
		// commits without waiting: measured.)
		touchOwn: r.Replace(`UPDATE {T} SET lease_until = lease_until
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state = 'p'{SYNC}`),

		// Recording a terminal outcome clears the lease, which means
		// nothing any more (8 bytes less a row, migration 0003).
		finishTerminal: r.Replace(strings.Replace(finishTerminal, "{ASYNC}", "", 1)),

		// Finish when the caller holds the claim: the UPDATE also checks
		// every column it does not write against the claim, so a changed
		// row means the record is the claim with the written fields over
		// it, and nothing needs to be returned: it runs as an Exec, and
		// flagged waiters are woken from the SET list (notifyInSet).
		//
		// created_at is compared with IS NOT DISTINCT FROM (the same test:
		// the column is NOT NULL), which no index can serve. With "=", a
		// generic plan made while the table was small (a connection's
		// cached plan, made after five runs) could probe the created_at
		// index instead of the primary key — the smaller index, so the
		// cheaper guess on a small table — and every finish then walked
		// all the records created in the same microsecond: all of them
		// under a fixed clock (4–8 ms a finish at 8,500 records, measured
		// with auto_explain; TestFinishKnownProbesThePrimaryKey).
		finishKnown:   r.Replace(strings.Replace(finishKnown, "{ASYNC}", "", 1)),
		finishUnknown: r.Replace(strings.Replace(finishUnknown, "{ASYNC}", "", 1)),

		finishTerminalAsync: r.Replace(strings.Replace(finishTerminal, "{ASYNC}", " AND "+asyncClause, 1)),
		finishKnownAsync:    r.Replace(strings.Replace(finishKnown, "{ASYNC}", " AND "+asyncClause, 1)),
		finishUnknownAsync:  r.Replace(strings.Replace(finishUnknown, "{ASYNC}", " AND "+asyncClause, 1)),

		// The EXISTS sub-select sees the statement's snapshot, taken before
		// the delete: it tells "held by someone else" from "already gone".
		release: r.Replace(`WITH del AS (
	DELETE FROM {T} WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u')
	RETURNING ` + notifyAt("5", "6") + ` AS n
)
SELECT (SELECT count(*) FROM del), EXISTS (SELECT 1 FROM {T} WHERE scope = $1 AND key = $2)`),

		heartbeat: r.Replace(`UPDATE {T} SET lease_until = $5
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state = 'p'`),

		resolveUpdate: r.Replace(strings.Replace(resolveUpdate, "{SYNC}", "", 1) + notifyAt("11", "12")),
		// A resolution to in_progress (a re-drive) is a claim: with
		// replicated claims it waits for the standbys like one.
		resolveClaim: r.Replace(resolveUpdate + notifyAt("11", "12")),

		resolveDelete: r.Replace(`DELETE FROM {T}
WHERE scope = $1 AND key = $2 AND state = ANY($3::"char"[]) AND ($4::bigint = 0 OR fence = $4)
RETURNING {COLS}, ` + notifyAt("5", "6")),

		setMark: r.Replace(`WITH upd AS (
	UPDATE {T} SET mark = $4 WHERE scope = $1 AND key = $2 AND fence = $3 RETURNING 1
)
SELECT (SELECT count(*) FROM upd), EXISTS (SELECT 1 FROM {T} WHERE scope = $1 AND key = $2)`),

		// A waiter flags an in-flight record so that its outcome notifies.
		// Only the first waiter writes; a record that is no longer in
		// flight needs no flag (the waiter re-reads it).
		markWaiting: r.Replace(`UPDATE {T} SET waiting = true WHERE scope = $1 AND key = $2 AND state = 'p' AND NOT waiting`),

		get: r.Replace(`SELECT {COLS} FROM {T} WHERE scope = $1 AND key = $2`),

		list: r.Replace(`SELECT {COLS} FROM {T}`),

		// The sub-select walks the created_at index, oldest first: neither
		// state nor expires_at is indexed, so that recording an outcome
		// stays a HOT update (migration 0002), and records expire in about
		// the order they were created. The DELETE then finds the chosen
		// rows by their tuple ids (a TID scan, whatever the planner thinks
		// of the table's size). Both conditions are repeated on it: under
		// READ COMMITTED a row re-claimed after the sub-select ran is
		// re-checked against its newest version — whose tuple id is not
		// in the list — and left alone.
		sweep: r.Replace(`DELETE FROM {T} WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM {T} WHERE state IN ('s', 'f') AND expires_at <= $1 ORDER BY created_at LIMIT $2
)) AND state IN ('s', 'f') AND expires_at <= $1`),
		// The sweep with its walk bounded: only records created at or
		// before $3 can have expired (see Sweep), an index range.
		sweepSince: r.Replace(`DELETE FROM {T} WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM {T} WHERE created_at <= $3 AND state IN ('s', 'f') AND expires_at <= $1 ORDER BY created_at LIMIT $2
)) AND state IN ('s', 'f') AND expires_at <= $1`),
		sweepUnbounded: r.Replace(`DELETE FROM {T} WHERE state IN ('s', 'f') AND expires_at <= $1`),
	}
}

// syncClause is the condition a replicated claim's statement carries. It
// sets synchronous_commit for the rest of the transaction (set_config with
// is_local is SET LOCAL; PostgreSQL reads the setting when the transaction
// commits, after the statement), so that the commit waits for the
// standbys at level; and client_min_messages, so that PostgreSQL's warning
// about a cancelled wait reaches the client whatever the role's setting.
// Both calls return text, never NULL: the condition is always true. level
// is one of Config.ReplicatedClaims' values, validated.
func syncClause(level string) string {
	return "set_config('synchronous_commit', '" + level + "', true) IS NOT NULL AND set_config('client_min_messages', 'warning', true) IS NOT NULL"
}

// asyncClause is the condition an outcome's statement carries under
// Config.AsyncOutcomes: synchronous_commit off for the rest of its
// transaction, which is the statement's own (PostgreSQL reads the setting
// at commit), so the commit returns before its WAL is flushed. The call
// returns text, never NULL: the condition is always true. It must never
// reach a transaction that also writes a claim.
const asyncClause = "set_config('synchronous_commit', 'off', true) IS NOT NULL"

// notifyInSet is a SET item that wakes flagged waiters of the changed row
// without a RETURNING clause, so the statement runs as an Exec: the
// expression keeps the waiting flag's value (pg_notify's void result IS NOT
// NULL) and calls pg_notify only when it is set, once per changed row. It
// depends on the column, so the planner cannot fold the call away.
func notifyInSet(notify bool, a, b string) string {
	if !notify {
		return ""
	}
	return ", waiting = CASE WHEN waiting THEN pg_notify($" + a + "::text, $" + b + "::text) IS NOT NULL ELSE false END"
}
