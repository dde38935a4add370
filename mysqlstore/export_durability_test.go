package mysqlstore

// DurabilityFindings judges innodb_flush_log_at_trx_commit as
// CheckDurability does, for values a shared test server cannot have.
var DurabilityFindings = durabilityFindings
