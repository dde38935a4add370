package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsyntax"
)

// HeaderName is the request header that carries the key, after the IETF
// draft "The Idempotency-Key HTTP Header Field".
const HeaderName = "Idempotency-Key"

// ReplayedHeader is set to "true" on responses served from a record.
const ReplayedHeader = "Idempotent-Replayed"

// ErrNoKey reports a request without an Idempotency-Key header.
var ErrNoKey = errors.New("idemhttp: no Idempotency-Key header")

// KeyFromHeader returns the key carried by h, [ErrNoKey] when the header is
// absent, or an error matching [idem.ErrInvalidKey] when it is malformed or
// repeated.
func KeyFromHeader(h http.Header) (idem.Key, error) {
	vs := h.Values(HeaderName)
	switch len(vs) {
	case 0:
		return "", ErrNoKey
	case 1:
		return ParseKeyHeader(vs[0])
	default:
		return "", &idem.KeyError{Reason: "the Idempotency-Key header is repeated"}
	}
}

// ParseKeyHeader parses an Idempotency-Key field value.
//
// The draft defines the value as a structured-field string (RFC 8941):
// `"abc"`, with `\"` and `\\` as the only escapes and printable ASCII
// inside. Many clients send the key unquoted, so a bare value is accepted as
// the same key: `abc` and `"abc"` are one key. A bare value may hold any
// visible ASCII except '"', '\', ',' and ';' (a comma would make it a list
// and a semicolon would start parameters, so such values are ambiguous and
// refused rather than guessed at); to use those characters, quote the key.
// Surrounding spaces and tabs are ignored. The decoded key must be a valid
// [idem.Key]: 1 to 255 bytes. Every error matches [idem.ErrInvalidKey].
func ParseKeyHeader(v string) (idem.Key, error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", &idem.KeyError{Reason: "empty"}
	}
	var key string
	if v[0] == '"' {
		s, err := parseSFString(v)
		if err != nil {
			return "", err
		}
		key = s
	} else {
		if err := checkBare(v); err != nil {
			return "", err
		}
		key = v
	}
	return idem.ParseKey(key)
}

// parseSFString decodes an RFC 8941 sf-string that must span all of v.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", &idem.KeyError{Key: short(v), Reason: "malformed string: only \\\" and \\\\ may be escaped"}
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", &idem.KeyError{Key: short(v), Reason: "malformed string: data after the closing quote"}
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", &idem.KeyError{Key: short(v), Reason: "malformed string: control or non-ASCII byte"}
		default:
			b.WriteByte(c)
		}
		if b.Len() > idem.MaxKeyLen {
			return "", &idem.KeyError{Key: short(v), Reason: "longer than 255 bytes"}
		}
	}
	return "", &idem.KeyError{Key: short(v), Reason: "malformed string: no closing quote"}
}

func checkBare(v string) error {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= 0x20 || c > 0x7e || c == '"' || c == '\\' || c == ',' || c == ';' {
			return &idem.KeyError{Key: short(v), Reason: "unquoted key holds a space, control, non-ASCII, '\"', '\\', ',' or ';' byte; send it as a quoted string"}
		}
	}
	return nil
}

// FormatKeyHeader formats key as a structured-field string, the form the
// draft specifies.
func FormatKeyHeader(key idem.Key) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

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

// IsJSONContentType reports whether the Content-Type value ct names JSON:
// application/json or application/<something>+json, in any case, with or
// without parameters.
func IsJSONContentType(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	const app = "application/"
	if len(ct) < len(app) || !strings.EqualFold(ct[:len(app)], app) {
		return false
	}
	sub := ct[len(app):]
	if strings.EqualFold(sub, "json") {
		return true
	}
	const suffix = "+json"
	if len(sub) <= len(suffix) || !strings.EqualFold(sub[len(sub)-len(suffix):], suffix) {
		return false
	}
	return httpsyntax.IsToken(sub[:len(sub)-len(suffix)])
}

// IsFormContentType reports whether the Content-Type value ct is
// application/x-www-form-urlencoded, in any case, with or without
// parameters.
func IsFormContentType(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded")
}
