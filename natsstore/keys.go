package natsstore

import (
	"errors"
	"strings"
)

// A record lives under the KV key "r." + escape(scope) + "." + escape(key).
// A KV key is a NATS subject of the alphabet [-/_=.a-zA-Z0-9] whose tokens
// (between dots) are not empty. escape keeps the letters, digits, '-', '_'
// and '/' and writes every other byte as '=' and two upper-case hex
// digits; the empty string is "=", which no non-empty string escapes to
// (an '=' is always followed by two hex digits). Each part so becomes one
// non-empty token without a dot, and the split at the dots is unique:
// two different (scope, key) pairs never share a KV key.

// recordPrefix is the first token of every record key; other tokens are
// left for data of other kinds in the same bucket.
const recordPrefix = "r"

// escapeAppend appends s's escape to b.
func escapeAppend(b []byte, s string) []byte {
	if s == "" {
		return append(b, '=')
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '=', hex[c>>4], hex[c&15])
	}
	return b
}

// plain reports whether c stands for itself in an escaped token.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '/'
}

// escape returns s as one KV key token.
func escape(s string) string { return string(escapeAppend(make([]byte, 0, len(s)+2), s)) }

// errBadToken is returned by unescape for a token escape cannot produce.
var errBadToken = errors.New("natsstore: not an escaped token")

// unescape inverts escape; it refuses any token escape cannot produce
// (lower-case hex, an escaped plain byte, a stray '='), so that the
// inverse is exact.
func unescape(tok string) (string, error) {
	if tok == "=" {
		return "", nil
	}
	if tok == "" {
		return "", errBadToken
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		if c != '=' || i+2 >= len(tok) {
			return "", errBadToken
		}
		hi, ok1 := unhex(tok[i+1])
		lo, ok2 := unhex(tok[i+2])
		v := hi<<4 | lo
		if !ok1 || !ok2 || plain(v) {
			return "", errBadToken
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// recordKey is the KV key of the record for (scope, key).
func recordKey(scope, key string) string {
	b := make([]byte, 0, len(recordPrefix)+len(scope)+len(key)+8)
	b = append(b, recordPrefix...)
	b = append(b, '.')
	b = escapeAppend(b, scope)
	b = append(b, '.')
	return string(escapeAppend(b, key))
}

// scopeFilter is the KV key filter of every record of scope; "" is every
// record.
func scopeFilter(scope string) string {
	if scope == "" {
		return recordPrefix + ".>"
	}
	return recordPrefix + "." + escape(scope) + ".*"
}

// parseRecordKey inverts recordKey.
func parseRecordKey(k string) (scope, key string, err error) {
	rest, ok := strings.CutPrefix(k, recordPrefix+".")
	if !ok {
		return "", "", errBadToken
	}
	st, kt, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(kt, ".") {
		return "", "", errBadToken
	}
	if scope, err = unescape(st); err != nil {
		return "", "", err
	}
	key, err = unescape(kt)
	return scope, key, err
}
