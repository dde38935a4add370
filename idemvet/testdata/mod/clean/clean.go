// Package clean has nothing to report.
package clean

import "net/http"

// Forward forwards the caller's key.
func Forward(in, out *http.Request) {
	out.Header.Set("Idempotency-Key", in.Header.Get("Idempotency-Key"))
}
