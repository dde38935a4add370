// Package bench measures idem's engine against the raw driver of the same
// store, in the same run, and reports idem's cost as a ratio of that floor.
//
// For each scenario (first-time requests, replays, a duplicate storm, a
// 90/10 mix) and each concurrency, the raw side and idem's side of the cell
// take turns in half-second slices until each has run the cell's duration,
// so that drift of a shared machine hits both sides alike. The raw side does the minimal
// statements of an idempotent request against the same server, with the
// same durability setting, on a scratch table of the same shape:
//
//	first time  INSERT (in_progress) then UPDATE (succeeded)   two commits
//	replay      SELECT by primary key                          one read
//	storm       INSERT-if-absent, then UPDATE if it won, else SELECT
//
// (Redis: SET NX + HSET, and HGETALL.) idem's side opens the store through
// internal/storeopen from the same DSN, pointed at its own scratch table or
// key prefix, so the bench never touches a deployment's records and drops
// everything it created when it ends.
//
// Store options written in the DSN's query (for example the ?batch=…
// group-commit window) are passed to storeopen unchanged and
// printed in the report header, so runs with and without an option can be
// compared side by side.
//
// The waiters scenario holds one key, starts many InFlightWait callers on
// it, releases it after a second, and reports the store calls it cost and
// the process's peak resident memory.
package bench
