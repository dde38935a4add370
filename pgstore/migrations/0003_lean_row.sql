-- 0003: a leaner row, about 65 bytes less a record.
--
-- A record with a 200-byte result took ~543 B (heap, primary key and
-- created_at index; docs/performance.md), some of it spent on nothing a
-- reader needs. This layout drops that:
--   * state is a one-byte "char" code — p(in_progress), s(ucceeded),
--     f(ailed), u(nknown) — instead of up to 12 bytes of text;
--   * attempt_id is bytea: the 32 hex characters of an engine attempt id as
--     their 16 bytes behind a tag byte 1, any other id as its UTF-8 bytes
--     behind a tag byte 2 (pgstore encodes and decodes it);
--   * lease_until is cleared when an outcome is recorded: a lease means
--     nothing once a record is terminal;
--   * the fixed-width columns come first, so no column waits for 8-byte
--     alignment behind a variable-length one.
-- Indexes and fillfactor are 0002's: a finish still changes no indexed
-- column (is_unknown stays false), so it stays a HOT update.
--
-- PostgreSQL cannot reorder the columns of a table, so this copies the
-- records into a new table in one transaction: the old one is renamed to
-- {{v2_table}}, its index names freed, the records copied over, its owner
-- and privileges carried across, and it is dropped. On a large table this
-- holds an exclusive lock for the whole copy and needs room for a second
-- copy of the table: run `idem migrate --print` and apply it in a quiet
-- moment. Row-level security policies, publications, triggers and
-- comments on the table are not carried over.
ALTER TABLE {{table}} RENAME TO {{v2_table}};
ALTER TABLE {{schema}}.{{v2_table}} DROP CONSTRAINT {{pkey}};
DROP INDEX {{schema}}.{{created_idx}};
DROP INDEX {{schema}}.{{unknown_idx}};

CREATE TABLE {{table}} (
    fence        bigint NOT NULL,
    created_at   timestamptz NOT NULL,
    lease_until  timestamptz,
    completed_at timestamptz,
    expires_at   timestamptz,
    state        "char" NOT NULL,
    -- waiting is set by a waiter in another process (Store.Subscribe) while
    -- the record is in_progress; only then does recording the outcome pay
    -- for a NOTIFY, which serializes commits database-wide.
    waiting      boolean NOT NULL DEFAULT false,
    is_unknown   boolean GENERATED ALWAYS AS (state = 'u') STORED,
    scope        text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    fingerprint  bytea NOT NULL,
    attempt_id   bytea NOT NULL,
    mark         text NOT NULL DEFAULT '',
    intent       bytea,
    result       bytea,
    CONSTRAINT {{pkey}} PRIMARY KEY (scope, key),
    CONSTRAINT {{state_check}} CHECK (state IN ('p', 's', 'f', 'u')),
    CONSTRAINT {{fence_check}} CHECK (fence > 0)
) WITH (fillfactor = 90);

INSERT INTO {{table}} (fence, created_at, lease_until, completed_at, expires_at, state, waiting,
    scope, key, fingerprint, attempt_id, mark, intent, result)
SELECT fence, created_at,
    CASE WHEN state IN ('succeeded', 'failed') THEN NULL ELSE lease_until END,
    completed_at, expires_at,
    CASE state WHEN 'in_progress' THEN 'p' WHEN 'succeeded' THEN 's' WHEN 'failed' THEN 'f' ELSE 'u' END::"char",
    waiting, scope, key, fingerprint,
    CASE WHEN attempt_id ~ '^[0-9a-f]{32}$' THEN '\x01'::bytea || decode(attempt_id, 'hex')
         ELSE '\x02'::bytea || convert_to(attempt_id, 'UTF8') END,
    mark, intent, result
FROM {{schema}}.{{v2_table}};

DO $idem$
DECLARE
    owner name;
    g record;
BEGIN
    SELECT r.rolname INTO owner FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
    WHERE c.oid = {{v2_table_lit}}::regclass;
    IF owner <> current_user THEN
        EXECUTE format('ALTER TABLE %s OWNER TO %I', {{table_lit}}, owner);
    END IF;
    FOR g IN
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee,
               a.privilege_type, a.is_grantable
        FROM pg_class c, aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE c.oid = {{v2_table_lit}}::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON %s TO %s%s', g.privilege_type, {{table_lit}}, g.grantee,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$idem$;

DROP TABLE {{schema}}.{{v2_table}};

CREATE INDEX {{created_idx}} ON {{table}} (created_at);
CREATE INDEX {{unknown_idx}} ON {{table}} (created_at) WHERE is_unknown;
