package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/idemkit/idem"
)

// jsonFingerprintTag is the domain tag [idem.FingerprintRequest] hashes a
// JSON body under. fingerprintJSON hashes the same parts from a canonical
// form it also uses for the digests; a test holds the two equal.
var jsonFingerprintTag = []byte("idem/body/json/v1")

// canonBufs holds canonical-form buffers between requests.
var canonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledCanon keeps one huge body from pinning its memory in the pool.
const maxPooledCanon = 64 << 10

// fingerprintJSON returns what idem.FingerprintRequest(method, route, body,
// true) returns and, when body is an object, its per-member digests as
// idem.TopLevelDigests computes them, encoded for the intent
// (encodeDigests): both from one canonicalisation. The error is the
// canonicaliser's *idem.JSONError.
func fingerprintJSON(method, route string, body []byte) (fp idem.Fingerprint, digests string, object bool, err error) {
	fp, bp, err := canonicalJSON(method, route, body)
	defer releaseCanon(bp)
	if err != nil {
		return fp, "", false, err
	}
	digests, object = objectDigests(*bp, body)
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
// form canon of body, and whether body is an object they were computed for.
func objectDigests(canon, body []byte) (string, bool) {
	if len(canon) == 0 || canon[0] != '{' {
		return "", false
	}
	if d, ok := canonicalDigests(canon); ok {
		return d, true
	}
	// A member name with an escape: let the root package unescape it.
	m, err := idem.TopLevelDigests(body)
	if err != nil {
		return "", false
	}
	return encodeDigests(m), true
}

// canonicalDigests walks the canonical object canon (no whitespace, names
// unique) and encodes each member's digest: the first 8 bytes of the
// SHA-256 of its canonical value, in hex. It gives up (false) on a name
// holding an escape.
func canonicalDigests(canon []byte) (string, bool) {
	var arr [256]byte
	out := arr[:0]
	i := 1
	if i < len(canon) && canon[i] == '}' {
		return "", true
	}
	for i < len(canon) && canon[i] == '"' {
		start := i + 1
		end := start
		for end < len(canon) && canon[end] != '"' {
			if canon[end] == '\\' {
				return "", false
			}
			end++
		}
		i = end + 2 // the closing quote and ':'
		if i > len(canon) {
			return "", false
		}
		vstart := i
		i = skipCanonicalValue(canon, i)
		if i >= len(canon) {
			return "", false
		}
		sum := sha256.Sum256(canon[vstart:i])
		if len(out) > 0 {
			out = append(out, '&')
		}
		out = appendQueryEscape(out, canon[start:end])
		out = append(out, '=')
		out = hex.AppendEncode(out, sum[:8])
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
