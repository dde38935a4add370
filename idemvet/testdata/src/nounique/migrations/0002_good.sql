-- The field guide's correct table: the unique constraint decides the claim.
CREATE TABLE idempotency_keys_v2 (
    key text PRIMARY KEY,
    state text NOT NULL,
    request_hash bytea NOT NULL
);

-- idem's own shape: a composite primary key on (scope, key).
CREATE TABLE idem_records (
    scope text NOT NULL,
    key text NOT NULL,
    CONSTRAINT idem_records_pkey PRIMARY KEY (scope, key)
);

-- A unique index in the same file.
CREATE TABLE processed_events (event_id text NOT NULL, at timestamptz);
CREATE UNIQUE INDEX processed_events_event_id ON processed_events (event_id);

-- ALTER TABLE … ADD CONSTRAINT … UNIQUE.
CREATE TABLE consumed_messages (message_id text NOT NULL);
ALTER TABLE consumed_messages ADD CONSTRAINT consumed_messages_uq UNIQUE (message_id);

-- MySQL: UNIQUE KEY with a prefix length.
CREATE TABLE `dedup_keys` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `dedup_key` varbinary(255) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `dedup_keys_key` (`dedup_key`(191))
);

-- Not a dedup table.
CREATE TABLE orders (id bigint, amount bigint);

-- A justified exception.
-- idem:ignore nounique an append-only audit log; the claim is in idem_records
CREATE TABLE processed_audit (message_id text, at timestamptz);
