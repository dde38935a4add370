-- Records: one row per (scope, key). The primary key is the unique
-- constraint that decides every claim; scope and key are VARBINARY so that
-- comparison is exact and case-sensitive, whatever the server collation.
-- Times are BIGINT microseconds since the Unix epoch, UTC; NULL means zero.
CREATE TABLE IF NOT EXISTS `{{table}}` (
  scope        VARBINARY(255) NOT NULL,
  `key`        VARBINARY(255) NOT NULL,
  fingerprint  BINARY(32)     NOT NULL,
  state        VARBINARY(16)  NOT NULL,
  fence        BIGINT         NOT NULL,
  attempt_id   VARBINARY(255) NOT NULL,
  intent       LONGBLOB       NULL,
  result       LONGBLOB       NULL,
  mark         VARBINARY(32)  NOT NULL DEFAULT '',
  created_at   BIGINT         NOT NULL,
  lease_until  BIGINT         NULL,
  completed_at BIGINT         NULL,
  expires_at   BIGINT         NULL,
  PRIMARY KEY (scope, `key`),
  KEY state_created_at (state, created_at),
  KEY expires_at (expires_at),
  CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown'))
) ENGINE=InnoDB;
