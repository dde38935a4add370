-- idem_records holds one row per (scope, key). The primary key is what
-- decides a claim: two concurrent claims of one key cannot both insert.
-- Times are unix microseconds UTC; NULL means "not set".
CREATE TABLE idem_records (
    scope        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    fingerprint  BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    state        TEXT    NOT NULL CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown')),
    fence        INTEGER NOT NULL CHECK (fence > 0),
    attempt_id   TEXT    NOT NULL,
    intent       BLOB,
    result       BLOB,
    mark         TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    lease_until  INTEGER,
    completed_at INTEGER,
    expires_at   INTEGER,
    PRIMARY KEY (scope, key)
);

-- List filters by state and walks created_at order.
CREATE INDEX idem_records_state_created ON idem_records (state, created_at);
CREATE INDEX idem_records_created ON idem_records (created_at, scope, key);

-- Sweep finds expired terminal records; unknown and in_progress rows are
-- never in this index, so the sweeper cannot even see them.
CREATE INDEX idem_records_sweep ON idem_records (expires_at)
    WHERE state IN ('succeeded', 'failed');
