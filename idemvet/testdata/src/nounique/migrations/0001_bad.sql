-- The field guide's red flag: a dedup table with no unique index.
CREATE TABLE processed_messages ( -- want "dedup table processed_messages has no PRIMARY KEY or UNIQUE on its key column message_id"
    message_id text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);

create table if not exists "public"."idempotency_keys" ( -- want "dedup table idempotency_keys has no PRIMARY KEY or UNIQUE on its key column key"
    id bigserial,
    key varchar(255) not null,
    response jsonb,
    created_at timestamptz
);

-- An index, but not a unique one.
CREATE TABLE webhook_dedup (event_id text NOT NULL, seen_at timestamptz); -- want "dedup table webhook_dedup has no PRIMARY KEY or UNIQUE on its key column event_id"
CREATE INDEX webhook_dedup_event ON webhook_dedup (event_id);

-- Uniqueness, but on another column.
CREATE TABLE inbox ( -- want "dedup table inbox has no PRIMARY KEY or UNIQUE on its key column dedup_key"
    id bigint PRIMARY KEY,
    dedup_key text NOT NULL
);

-- No key column that can be recognised, and no constraint at all.
CREATE TABLE seen_events (payload jsonb, at timestamptz); -- want "dedup table seen_events has no PRIMARY KEY or UNIQUE constraint"

-- A directive without a reason is itself a finding. want-next "idem:ignore directive without a reason"
-- idem:ignore nounique
CREATE TABLE x (a int);
