-- 0001: the records table.
--
-- The primary key on (scope, key) is what decides a claim: two claimers of
-- one key meet at this constraint, never at a read. Do not drop it.
-- scope and key use the "C" collation so that ordering (List, cursors) is
-- byte order on every server, whatever the database's default collation.
CREATE TABLE {{table}} (
    scope        text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    fingerprint  bytea NOT NULL,
    state        text NOT NULL,
    fence        bigint NOT NULL,
    attempt_id   text NOT NULL,
    intent       bytea,
    result       bytea,
    mark         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    lease_until  timestamptz,
    completed_at timestamptz,
    expires_at   timestamptz,
    -- waiting is set by a waiter in another process (Store.Subscribe) while
    -- the record is in_progress; only then does recording the outcome pay
    -- for a NOTIFY, which serializes commits database-wide.
    waiting      boolean NOT NULL DEFAULT false,
    CONSTRAINT {{pkey}} PRIMARY KEY (scope, key),
    CONSTRAINT {{state_check}} CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown')),
    CONSTRAINT {{fence_check}} CHECK (fence > 0)
);

-- List: filter by state, oldest first.
CREATE INDEX {{list_idx}} ON {{table}} (state, created_at);

-- Sweep: only terminal records ever expire, so the index holds only them.
CREATE INDEX {{sweep_idx}} ON {{table}} (expires_at) WHERE state IN ('succeeded', 'failed');
