package idem

import (
	"path"
	"strings"
)

// MatchPattern reports whether s (a request path, a gRPC full method name)
// matches the rule pattern p, as the adapters' rules read patterns
// (idemhttp.Rule, idemgrpc.Rule): an empty p matches everything, a p
// ending in "/" matches every s it prefixes, and any other p is a
// [path.Match] pattern (a malformed one matches nothing).
func MatchPattern(p, s string) bool {
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
