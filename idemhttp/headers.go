package idemhttp

import (
	"fmt"
	"net/http"
)

// DefaultRecordHeaders are the response headers recorded and replayed when
// Config.RecordHeaders adds nothing: those that describe the body or the
// resource, none that carry credentials or connection state, and the
// upstream's request id (Request-Id, X-Request-Id), which SDKs surface and
// support tickets quote: a replay names the request that made the effect.
var DefaultRecordHeaders = []string{
	"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language",
	"Content-Location", "Content-Type", "ETag", "Expires", "Last-Modified", "Link",
	"Location", "Request-Id", "Retry-After", "Vary", "X-Request-Id",
}

// neverRecorded are headers that are never recorded or replayed, even when
// asked: credentials, cookies, hop-by-hop headers (RFC 9110 §7.6.1) and
// those the server computes per response.
var neverRecorded = map[string]bool{
	"Set-Cookie": true, "Set-Cookie2": true, "Authorization": true, "Proxy-Authorization": true,
	"Proxy-Authenticate": true, "Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Date": true, "Idempotent-Replayed": true,
}

func allowList(extra []string) (map[string]bool, error) {
	allow := make(map[string]bool, len(DefaultRecordHeaders)+len(extra))
	for _, h := range DefaultRecordHeaders {
		allow[http.CanonicalHeaderKey(h)] = true
	}
	for _, h := range extra {
		c := http.CanonicalHeaderKey(h)
		if neverRecorded[c] {
			return nil, fmt.Errorf("idemhttp: Config.RecordHeaders: %q is never recorded (credentials, cookies, hop-by-hop or per-response)", h)
		}
		allow[c] = true
	}
	return allow, nil
}
