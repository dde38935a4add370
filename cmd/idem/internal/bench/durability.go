package bench

import "strings"

// The notes below say, for a server setting that lets an acknowledged write
// be lost in a crash, what could be lost. idem's guarantee rests on the
// claim being durable before the effect runs; a bench run in such a setting
// measures a different trade, and the baselines assume the durable
// one. An empty note means the setting is durable (or could not be read).

// redisDurabilityNote reads CONFIG GET appendonly / appendfsync.
func redisDurabilityNote(appendonly, appendfsync string) string {
	switch {
	case appendonly == "no":
		return "appendonly=no: claims written since the last RDB snapshot are lost when Redis restarts or crashes"
	case appendonly == "yes" && appendfsync != "always":
		return "appendfsync=" + appendfsync + ": up to a second of claims can be lost in a crash"
	}
	return ""
}

// postgresDurabilityNote reads synchronous_commit and fsync.
func postgresDurabilityNote(syncCommit, fsync string) string {
	switch {
	case fsync == "off":
		return "fsync=off: a crash can lose or corrupt committed claims"
	case syncCommit == "off":
		return "synchronous_commit=off: the last commits before a crash can be lost"
	}
	return ""
}

// mysqlDurabilityNote reads innodb_flush_log_at_trx_commit.
func mysqlDurabilityNote(flush string) string {
	if flush == "0" || flush == "2" {
		return "innodb_flush_log_at_trx_commit=" + flush + ": up to a second of commits can be lost in a crash"
	}
	return ""
}

// sqliteDurabilityNote reads the synchronous setting the stores open with.
func sqliteDurabilityNote(sync string) string {
	switch s := strings.ToUpper(sync); s {
	case "FULL", "EXTRA", "":
		return ""
	default:
		return "synchronous=" + s + ": the last commits before a power loss can be lost"
	}
}
