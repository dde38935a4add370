package storeopen

import (
	"net/url"
	"path/filepath"
	"sort"
	"strings"
)

// identityParams are the query parameters that pick which records a DSN
// names (a schema, a table, a key prefix); the others tune the connection.
var identityParams = []string{"schema", "table", "prefix", "dbname", "database", "master"}

// Identity names the store d opens, for binding a spool directory to it
// (idem.OpenSpoolFor): the same across restarts, different for two stores.
// It is the DSN without credentials and without the parameters that only
// tune the connection: scheme, user, hosts, database or file, and the
// parameters that pick the records (schema, table, prefix). A SQLite path
// is made absolute. Two DSNs that reach one store by different host names
// get different identities; that refuses a shared spool rather than
// risking one.
func (d DSN) Identity() string {
	switch d.Scheme {
	case "memory":
		return "memory://"
	case "sqlite":
		path, _, _ := strings.Cut(d.Target, "?")
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return "sqlite://" + path
	}
	rest, query, _ := strings.Cut(d.Target, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, _, _ := strings.Cut(authority[:at], ":")
		authority = user + "@" + authority[at+1:]
	}
	id := d.Scheme + "://" + strings.ToLower(authority) + "/" + path
	q, err := url.ParseQuery(query)
	if err != nil {
		return id
	}
	var kept []string
	for _, k := range identityParams {
		if v := q.Get(k); v != "" {
			kept = append(kept, k+"="+url.QueryEscape(v))
		}
	}
	sort.Strings(kept)
	if len(kept) > 0 {
		id += "?" + strings.Join(kept, "&")
	}
	return id
}
