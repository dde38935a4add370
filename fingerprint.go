package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/idemkit/idem/internal/bodytag"
)

// Fingerprint is the SHA-256 of a request's canonical form. The same key
// with another fingerprint is a client bug, reported as [ErrMismatch].
type Fingerprint [32]byte

// String returns the fingerprint as 64 lower-case hex digits.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// IsZero reports whether f is the zero fingerprint (no request hashed).
func (f Fingerprint) IsZero() bool { return f == Fingerprint{} }

// ParseFingerprint parses 64 hex digits as written by [Fingerprint.String].
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	if len(s) != 64 {
		return f, fmt.Errorf("idem: fingerprint must be 64 hex digits, got %d characters", len(s))
	}
	if _, err := hex.Decode(f[:], []byte(s)); err != nil {
		return f, fmt.Errorf("idem: fingerprint: %w", err)
	}
	return f, nil
}

// NewFingerprint hashes parts as a length-prefixed sequence, so that
// ("ab","c") and ("a","bc") differ. Use it for requests that are not JSON;
// for JSON bodies see [FingerprintRequest].
func NewFingerprint(parts ...[]byte) Fingerprint {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// Domain tags keep the two ways of hashing a body apart, so that a JSON body
// and a raw body with the same bytes never share a fingerprint.
var (
	fingerprintJSONTag = []byte(bodytag.JSON)
	fingerprintRawTag  = []byte(bodytag.Raw)
)

// FingerprintRequest returns the fingerprint of a request: its method, its
// route and its body. A JSON body (isJSON) is hashed in canonical form, so
// member order and whitespace do not matter; if it is not valid JSON the
// error is a [*JSONError] (HTTP 400 rather than a silent byte hash). An
// empty body is not JSON: pass isJSON only when there is a body. Other
// bodies are hashed as bytes. JSON and raw bodies are hashed under
// different domain tags, so they never collide.
func FingerprintRequest(method, route string, body []byte, isJSON bool) (Fingerprint, error) {
	if !isJSON {
		return NewFingerprint(fingerprintRawTag, []byte(method), []byte(route), body), nil
	}
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.src, c.out = body, c.own[:0]
	err := c.document()
	c.own = c.out[:0] // keep the grown buffer for the next caller
	if err != nil {
		return Fingerprint{}, err
	}
	return NewFingerprint(fingerprintJSONTag, []byte(method), []byte(route), c.out), nil
}

// TopLevelDigests maps each member name of the JSON object body to a short
// hex digest (16 digits) of the member's canonical value. Stored beside a
// record, they let a mismatch report name the fields that changed
// ([DiffDigests]) without echoing any value. The digests are unsalted: a
// low-entropy value (an amount, a PIN) can be guessed from its digest, so
// keep them as private as the body. The error is a [*JSONError] if body is
// not a valid JSON object.
func TopLevelDigests(body []byte) (map[string]string, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.src, c.out = body, c.own[:0]
	defer func() { c.own = c.out[:0] }()
	i := c.skipSpace(0)
	if i >= len(body) || body[i] != '{' {
		return nil, c.fail(i, "not a JSON object")
	}
	digests := make(map[string]string)
	i = c.skipSpace(i + 1)
	if i < len(body) && body[i] == '}' {
		return digests, c.trailing(i + 1)
	}
	for {
		c.out = c.out[:0]
		var err error
		if i, err = c.member(i, 1); err != nil {
			return nil, err
		}
		m := c.members[0]
		c.members = c.members[:0]
		name := string(unescapeCanonical(c.out[m.start+1 : m.nameEnd-1]))
		if _, dup := digests[name]; dup {
			return nil, &JSONError{Offset: m.srcOff, Reason: "duplicate member name", duplicate: true}
		}
		sum := sha256.Sum256(c.out[m.nameEnd+1 : m.end])
		digests[name] = hex.EncodeToString(sum[:8])
		if i = c.skipSpace(i); i >= len(body) {
			return nil, c.fail(i, "unterminated object")
		}
		switch body[i] {
		case ',':
			i = c.skipSpace(i + 1)
		case '}':
			return digests, c.trailing(i + 1)
		default:
			return nil, c.fail(i, "expected ',' or '}' in object")
		}
	}
}

// DiffDigests returns, sorted, the member names that are in only one of a
// and b or whose digests differ: the fields a client changed between two
// requests. It returns nil when the digests agree.
func DiffDigests(a, b map[string]string) []string {
	var names []string
	for name, da := range a {
		if db, ok := b[name]; !ok || db != da {
			names = append(names, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
