-- 0002: an index layout that recording an outcome never touches.
--
-- PostgreSQL updates a row in place (a HOT update: no new index entries,
-- the old version pruned from the page) only when no column that any index
-- mentions — key, INCLUDE or partial predicate — changes value. Recording
-- an outcome writes state, result, completed_at and expires_at, and the
-- 0001 indexes mentioned state and expires_at: every finish wrote new
-- entries into all three indexes and left a dead tuple for VACUUM.
--
-- What stays indexed here is what a finish leaves alone:
--   * created_at: List's order and its cursor, `list --older-than`, and the
--     sweep, which walks the oldest records first and deletes the expired
--     ones (records expire in about the order they were created);
--   * is_unknown, a stored column computed from state: the records a finish
--     left unknown, for `list --state unknown`. It is false before and after
--     a first-time finish, so that finish stays HOT; only the rare writes
--     into or out of unknown change it.
-- fillfactor keeps a tenth of each page free when rows are inserted, so
-- the finished version of a row (its result added) fits on the row's page.
-- Measured with `idem bench` (first-time, 16 and 64 callers, 200-byte
-- results; docs/performance.md): fillfactor 100 left 88% of finishes HOT at
-- 541 B a record, 95: 95% at 567 B, 90: 98.5% at 628 B, 80: 99% at 660 B.
--
-- ADD COLUMN … STORED rewrites the table once, under an exclusive lock: on a
-- large table, run `idem migrate --print` and apply it in a quiet moment.
ALTER TABLE {{table}} ADD COLUMN is_unknown boolean GENERATED ALWAYS AS (state = 'unknown') STORED;

CREATE INDEX {{created_idx}} ON {{table}} (created_at);
CREATE INDEX {{unknown_idx}} ON {{table}} (created_at) WHERE is_unknown;

DROP INDEX {{schema}}.{{list_idx}};
DROP INDEX {{schema}}.{{sweep_idx}};

ALTER TABLE {{table}} SET (fillfactor = 90);
