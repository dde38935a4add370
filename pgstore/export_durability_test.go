package pgstore

// DurabilityFindings judges fsync, synchronous_commit and full_page_writes
// as CheckDurability does, for settings a shared test server cannot have.
var DurabilityFindings = durabilityFindings
