package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
)

// ScopeFunc returns the scope of a request's key: the authenticated
// principal (user, tenant, API key id). Uniqueness is on (scope, key), so
// one principal is never served another's recorded response. An error
// refuses the request with 401 (scope-missing).
type ScopeFunc func(r *http.Request) (string, error)

// GlobalScope puts every key in one namespace shared by all callers. A
// server opts in to it explicitly, by passing it as Config.Scope, when its
// callers are trusted to choose unique keys (for example a single internal
// client).
func GlobalScope(*http.Request) (string, error) { return "", nil }

// ErrNoScope is returned by the ScopeFunc of [HeaderScope] when the header
// is absent.
var ErrNoScope = errors.New("idemhttp: no principal to scope the key by")

// HeaderScope scopes keys by the value of a request header (for example
// Authorization, or an API key header). The value is stored as its SHA-256
// in hex, never in clear. A request without the header is refused.
func HeaderScope(name string) ScopeFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Values(name)
		if len(v) != 1 || v[0] == "" {
			return "", ErrNoScope
		}
		sum := sha256.Sum256([]byte(v[0]))
		return hex.EncodeToString(sum[:]), nil
	}
}
