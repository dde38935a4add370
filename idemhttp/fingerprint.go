package idemhttp

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/bodytag"
)

// jsonFingerprintTag is the domain tag [idem.FingerprintRequest] hashes a
// JSON body under. fingerprintJSON hashes the same parts from a canonical
// form it also uses for the digests; a test holds the two equal.
var jsonFingerprintTag = []byte(bodytag.JSON)

// canonBufs holds canonical-form buffers between requests.
var canonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledCanon keeps one huge body from pinning its memory in the pool.
const maxPooledCanon = 64 << 10

// fingerprintJSON returns what idem.FingerprintRequest(method, route, body,
// true) returns and, when body is an object, its per-member digests
// (memberDigest of each member's canonical value, under the member's
// unescaped name), encoded for the intent (encodeDigests): both from one
// canonicalisation. The error is the
// canonicaliser's *idem.JSONError.
func fingerprintJSON(method, route string, body []byte) (fp idem.Fingerprint, digests string, object bool, err error) {
	fp, bp, err := canonicalJSON(method, route, body)
	defer releaseCanon(bp)
	if err != nil {
		return fp, "", false, err
	}
	digests, object = objectDigests(*bp)
	return fp, digests, object, nil
}

// canonicalJSON canonicalises body into a pooled buffer, which the caller
// hands back with releaseCanon, and fingerprints the request as
// idem.FingerprintRequest(method, route, body, true) does.
func canonicalJSON(method, route string, body []byte) (idem.Fingerprint, *[]byte, error) {
	bp := canonBufs.Get().(*[]byte)
	canon, err := idem.AppendCanonicalJSON((*bp)[:0], body)
	*bp = canon
	if err != nil {
		return idem.Fingerprint{}, bp, err
	}
	return idem.NewFingerprint(jsonFingerprintTag, []byte(method), []byte(route), canon), bp, nil
}

func releaseCanon(bp *[]byte) {
	if cap(*bp) <= maxPooledCanon {
		*bp = (*bp)[:0]
		canonBufs.Put(bp)
	}
}

// objectDigests returns the encoded per-member digests of the canonical
// form canon of a JSON body, and whether the body is an object they were
// computed for.
func objectDigests(canon []byte) (string, bool) {
	if len(canon) == 0 || canon[0] != '{' {
		return "", false
	}
	return canonicalDigests(canon)
}

// memberDigest is the digest of one member's canonical value: the 64-bit
// xxHash (XXH64, seed 0), as 16 hex digits. It only has to tell members
// apart for a mismatch report — the request's fingerprint, which decides
// whether a retry matches, is SHA-256 over the whole canonical body — and
// costs a few nanoseconds where a SHA-256 per member cost a few hundred.
func memberDigest(dst, value []byte) []byte {
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], xxhash.Sum64(value))
	return hex.AppendEncode(dst, sum[:])
}

// canonicalDigests walks the canonical object canon (no whitespace, names
// unique) and encodes each member's name (unescaped) and memberDigest. It
// reports false if canon is not a canonical object.
func canonicalDigests(canon []byte) (string, bool) {
	var arr [256]byte
	out := arr[:0]
	i := 1
	if i < len(canon) && canon[i] == '}' {
		return "", i == len(canon)-1
	}
	for i < len(canon) && canon[i] == '"' {
		start := i + 1
		end := start
		escaped := false
		for end < len(canon) && canon[end] != '"' {
			if canon[end] == '\\' {
				escaped = true
				end++
			}
			end++
		}
		i = end + 2 // the closing quote and ':'
		if i > len(canon) {
			return "", false
		}
		name := canon[start:end]
		if escaped {
			var s string
			if json.Unmarshal(canon[start-1:end+1], &s) != nil {
				return "", false
			}
			name = []byte(s)
		}
		vstart := i
		i = skipCanonicalValue(canon, i)
		if i >= len(canon) {
			return "", false
		}
		if len(out) > 0 {
			out = append(out, '&')
		}
		out = appendQueryEscape(out, name)
		out = append(out, '=')
		out = memberDigest(out, canon[vstart:i])
		if canon[i] == '}' {
			return string(out), i == len(canon)-1
		}
		i++ // ','
	}
	return "", false
}

// skipCanonicalValue returns the offset of the ',' or '}' that ends the
// value starting at canon[i].
func skipCanonicalValue(canon []byte, i int) int {
	depth := 0
	for ; i < len(canon); i++ {
		switch canon[i] {
		case '"':
			for i++; i < len(canon) && canon[i] != '"'; i++ {
				if canon[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// appendQueryEscape appends s escaped as url.QueryEscape escapes it.
func appendQueryEscape(dst, s []byte) []byte {
	const hexUpper = "0123456789ABCDEF"
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			dst = append(dst, c)
		case c == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', hexUpper[c>>4], hexUpper[c&15])
		}
	}
	return dst
}
