package nounique

// An embedded schema string without the constraint.
const schema = `CREATE TABLE IF NOT EXISTS dedup (idempotency_key TEXT NOT NULL, result BLOB)` // want "dedup table dedup has no PRIMARY KEY or UNIQUE on its key column idempotency_key"

// An interpreted string.
var mysql = "CREATE TABLE handled_webhooks (delivery_id VARCHAR(64) NOT NULL, at DATETIME)" // want "dedup table handled_webhooks"

// Correct ones.
const good = `CREATE TABLE IF NOT EXISTS idem_keys (key TEXT PRIMARY KEY, result BLOB)`

var goodMySQL = "CREATE TABLE processed (message_id VARCHAR(64) NOT NULL UNIQUE)"

// Not SQL at all.
var text = "a table of contents"
