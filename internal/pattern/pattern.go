// Package pattern matches the route and method patterns of idemhttp's and
// idemgrpc's rules, so both read a pattern the same way.
package pattern

import (
	"path"
	"strings"
)

// Match reports whether s matches p: an empty p matches everything, a p
// ending in "/" matches every s it prefixes, and any other p is a
// path.Match pattern (a malformed one matches nothing).
func Match(p, s string) bool {
	switch {
	case p == "":
		return true
	case strings.HasSuffix(p, "/"):
		return strings.HasPrefix(s, p)
	default:
		ok, _ := path.Match(p, s)
		return ok
	}
}
