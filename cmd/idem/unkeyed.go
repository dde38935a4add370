package main

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemprom"
)

// countUnkeyed counts, in idem_unkeyed_requests_total, the requests next
// will not protect for want of a key: a method of methods (the proxy's
// --methods, upper case) without an Idempotency-Key header. They pass
// through to the upstream unprotected, or, with --require-key, are
// refused with 400 key-missing; result says which. A malformed or repeated
// key is not counted: it gets 400 key-invalid in both modes. The method
// label takes only values from methods, so the series stay few.
//
// It mirrors the rule the proxy gives idemhttp (every path, these
// methods; TRACE, a safe method, is never protected).
func countUnkeyed(next http.Handler, methods []string, requireKey bool, c *idemprom.UnkeyedRequests) http.Handler {
	result := idemprom.UnkeyedForwarded
	if requireKey {
		result = idemprom.UnkeyedRefused
	}
	var counted []string
	for _, m := range methods {
		if m != http.MethodTrace {
			counted = append(counted, m)
		}
	}
	c.Init(result, counted...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values(idemhttp.HeaderName)) == 0 {
			// idemhttp matches methods case-insensitively.
			if m := strings.ToUpper(r.Method); slices.Contains(counted, m) {
				c.Inc(m, result)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// unkeyedWarning is the line the proxy logs at start-up when --require-key
// is off.
const unkeyedWarning = "idem proxy: requests without an Idempotency-Key pass through to the upstream unprotected, and a retry of one runs again; " +
	"--require-key refuses them with 400 (counted in idem_unkeyed_requests_total, on --admin's /metrics)"
