package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
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
// ("ab","c") and ("a","bc") differ. Use it for requests that are neither
// JSON nor a plain body (a gRPC message); for a request body see
// [FingerprintBody].
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
// and a raw body with the same bytes never share a fingerprint. Fingerprints
// are stored, so a tag never changes; a new hashing gets a new tag.
var (
	fingerprintJSONTag = []byte("idem/body/json/v1")
	fingerprintRawTag  = []byte("idem/body/raw/v1")
	fingerprintFormTag = []byte("idem/body/form/v1")
)

// BodyKind says how a request body is canonicalised for its fingerprint.
type BodyKind uint8

const (
	// BodyRaw bodies are hashed as bytes and have no member digests.
	BodyRaw BodyKind = iota
	// BodyJSON bodies are hashed in canonical form ([CanonicalJSON]); a
	// JSON object's members get digests.
	BodyJSON
	// BodyForm bodies (application/x-www-form-urlencoded) are hashed in
	// canonical form ([CanonicalForm]), and each top-level field (the
	// part of a name before its first '[') gets a digest. A body that has
	// no canonical form is hashed as bytes, as a BodyRaw body is, with no
	// digests: a byte-identical retry still matches.
	BodyForm
)

// DefaultMaxDigests is the number of a JSON object's members that get a
// digest of their own when [BodyHasher.MaxDigests] is zero.
const DefaultMaxDigests = 64

// maxDigestsLen bounds the encoded entries of the members that get their
// own, whatever their names' lengths: a member whose entry would pass it
// and all after it share the rest entry (19 bytes more).
const maxDigestsLen = 4 << 10

// RestMembers is the name [Digests.Diff] gives the members past the bound
// (see [BodyHasher]), which share one digest.
const RestMembers = "…"

// restKey is the encoded name of the rest entry: '*' is never left
// unescaped in an encoded name, so no member can be mistaken for it.
const restKey = "*"

// Digests are a request's member digests in idem's one encoding: one
// "name=digest" entry per member, joined by '&', in canonical order (by the
// bytes of the decoded name), the name escaped as [url.QueryEscape] does and
// the digest the 64-bit xxHash (XXH64, seed 0) of the member's canonical
// value as 16 lower-case hex digits. Members past the bound share one entry,
// "*=digest", over their canonical text. The empty Digests has no entries.
//
// A digest only has to tell two values apart for a mismatch report
// ([Digests.Diff]); whether a retry matches is decided by the [Fingerprint],
// SHA-256 over the whole request. Digests are unsalted: a low-entropy value
// (an amount, a PIN) can be guessed from its digest, and equal values have
// equal digests whoever sent them, so never store or compare them as they
// are: key them per scope with a [DigestKey].
type Digests string

// BodyHasher computes a request's fingerprint and its member digests
// together. The zero value is ready to use; [FingerprintBody] uses it.
type BodyHasher struct {
	// MaxDigests bounds the members of a JSON object body that get a digest
	// of their own: the first MaxDigests in canonical order (and no more
	// than 4 KiB of encoded entries, whatever the names' lengths); the rest
	// share one entry, so a body of a hundred thousand tiny members still
	// has a short digest list. Zero means [DefaultMaxDigests]; negative, no
	// member gets its own entry.
	MaxDigests int
}

// FingerprintBody returns the fingerprint of a request — its method, its
// route and its body — and, when the body is a JSON object, its members'
// digests, both from one canonicalisation, with [BodyHasher]'s defaults.
//
// A JSON body (isJSON) is hashed in canonical form ([CanonicalJSON]), so
// member order and whitespace do not matter; if it is not valid JSON the
// error is a [*JSONError]. An empty body is not JSON: pass isJSON only when
// there is a body. Other bodies are hashed as bytes and have no digests.
// JSON and raw bodies are hashed under different domain tags, so they never
// collide.
func FingerprintBody(method, route string, body []byte, isJSON bool) (Fingerprint, Digests, error) {
	return BodyHasher{}.Hash(method, route, body, isJSON)
}

// Hash is [FingerprintBody] with h's bound on the digests.
func (h BodyHasher) Hash(method, route string, body []byte, isJSON bool) (Fingerprint, Digests, error) {
	var arr [256]byte
	fp, d, err := h.Append(arr[:0], method, route, body, isJSON)
	return fp, Digests(d), err
}

// Append is [BodyHasher.Hash] that appends the encoded digests to dst
// rather than allocate them, for a caller that keeps a buffer.
func (h BodyHasher) Append(dst []byte, method, route string, body []byte, isJSON bool) (Fingerprint, []byte, error) {
	kind := BodyRaw
	if isJSON {
		kind = BodyJSON
	}
	return h.AppendBody(dst, method, route, body, kind)
}

// AppendBody is [BodyHasher.Append] for a body of any [BodyKind]. The
// error is a [*JSONError] for a BodyJSON body that is not valid JSON, and
// always nil for the other kinds. Each kind hashes under its own domain
// tag, so bodies of different kinds never share a fingerprint.
func (h BodyHasher) AppendBody(dst []byte, method, route string, body []byte, kind BodyKind) (Fingerprint, []byte, error) {
	switch kind {
	case BodyJSON:
		return h.appendJSON(dst, method, route, body)
	case BodyForm:
		if fp, d, ok := h.appendForm(dst, method, route, body); ok {
			return fp, d, nil
		}
	}
	return NewFingerprint(fingerprintRawTag, []byte(method), []byte(route), body), dst, nil
}

// appendForm is AppendBody for a form body; ok is false when it has no
// canonical form.
func (h BodyHasher) appendForm(dst []byte, method, route string, body []byte) (Fingerprint, []byte, bool) {
	f := formPool.Get().(*formCanon)
	defer f.release()
	if f.parse(body) != nil {
		return Fingerprint{}, dst, false
	}
	canon := f.appendCanonical(f.text[:0])
	fp := NewFingerprint(fingerprintFormTag, []byte(method), []byte(route), canon)
	f.text = canon[:0] // keep the grown buffer
	return fp, f.appendDigests(dst, h.limit()), true
}

func (h BodyHasher) limit() int {
	if h.MaxDigests == 0 {
		return DefaultMaxDigests
	}
	return h.MaxDigests
}

func (h BodyHasher) appendJSON(dst []byte, method, route string, body []byte) (Fingerprint, []byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.src, c.out = body, c.own[:0]
	err := c.document()
	c.own = c.out[:0] // keep the grown buffer for the next caller
	if err != nil {
		return Fingerprint{}, dst, err
	}
	return NewFingerprint(fingerprintJSONTag, []byte(method), []byte(route), c.out), appendDigests(dst, c.out, h.limit()), nil
}

// appendDigests appends the encoded digests of the canonical document canon
// when it is an object, the first limit members with entries of their own.
func appendDigests(dst, canon []byte, limit int) []byte {
	if len(canon) < 2 || canon[0] != '{' {
		return dst
	}
	start := len(dst)
	for i := 1; i < len(canon)-1; {
		// The canonical name is a quoted string whose only escapes are
		// '\\' followed by one byte or by u00xx.
		end := i + 1
		for canon[end] != '"' {
			if canon[end] == '\\' {
				end++
			}
			end++
		}
		name := canon[i+1 : end]
		if limit <= 0 || len(dst)-start+escapedLen(name)+18 > maxDigestsLen {
			return appendDigest(appendEntry(dst, start), []byte(restKey), canon[i:len(canon)-1])
		}
		v := end + 2 // past the closing quote and ':'
		next := skipCanonicalValue(canon, v)
		dst = appendEntry(dst, start)
		dst = appendNameEscaped(dst, name)
		dst = appendDigest(dst, nil, canon[v:next])
		limit--
		i = next + 1 // past ',' (or the closing '}')
	}
	return dst
}

func appendEntry(dst []byte, start int) []byte {
	if len(dst) > start {
		dst = append(dst, '&')
	}
	return dst
}

// appendDigest appends name (already escaped), '=' and the digest of value.
func appendDigest(dst, name, value []byte) []byte {
	return appendDigestSum(dst, name, xxhash.Sum64(value))
}

// appendDigestSum appends name (already escaped), '=' and the digest sum.
func appendDigestSum(dst, name []byte, sum uint64) []byte {
	dst = append(dst, name...)
	dst = append(dst, '=')
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], sum)
	return hex.AppendEncode(dst, b[:])
}

// escapedLen is the length of the canonical string content s once
// unescaped and escaped by appendNameEscaped.
func escapedLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		b, w := unescapeCanonicalByte(s, i)
		n += 3
		if queryPlain(b) {
			n -= 2
		}
		i += w
	}
	return n
}

// appendNameEscaped appends the canonical string content s, unescaped, as
// url.QueryEscape escapes it.
func appendNameEscaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		b, n := unescapeCanonicalByte(s, i)
		dst = appendQueryByte(dst, b)
		i += n
	}
	return dst
}

// queryPlain reports whether url.QueryEscape writes c as one byte: itself,
// or '+' for a space.
func queryPlain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~' || c == ' '
}

func appendQueryByte(dst []byte, c byte) []byte {
	const hexUpper = "0123456789ABCDEF"
	switch {
	case c == ' ':
		return append(dst, '+')
	case queryPlain(c):
		return append(dst, c)
	}
	return append(dst, '%', hexUpper[c>>4], hexUpper[c&15])
}

// skipCanonicalValue returns the offset of the ',' or '}' that ends the
// canonical value starting at canon[i].
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

// DigestsOf returns the digests of named values that are not JSON members
// (a gRPC message's fields, each in its own encoding), in the encoding of
// [Digests]: sorted by name, the first limit with entries of their own
// (zero means [DefaultMaxDigests]), the rest sharing one over their names
// and values.
func DigestsOf(values map[string][]byte, limit int) Digests {
	if limit == 0 {
		limit = DefaultMaxDigests
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	slices.Sort(names)
	var dst []byte
	for i, k := range names {
		if limit <= 0 || len(dst)+len(url.QueryEscape(k))+18 > maxDigestsLen {
			var parts [][]byte
			for _, k := range names[i:] {
				parts = append(parts, []byte(k), values[k])
			}
			rest := NewFingerprint(parts...)
			return Digests(appendDigest(appendEntry(dst, 0), []byte(restKey), rest[:]))
		}
		dst = appendEntry(dst, 0)
		for j := 0; j < len(k); j++ {
			dst = appendQueryByte(dst, k[j])
		}
		dst = appendDigest(dst, nil, values[k])
		limit--
	}
	return Digests(dst)
}

// Len returns the number of entries in d, the rest entry included.
func (d Digests) Len() int {
	if d == "" {
		return 0
	}
	return strings.Count(string(d), "&") + 1
}

// Diff returns, sorted, the names of the members that are in only one of d
// and e or whose digests differ: the fields a client changed between two
// requests. Members past the bound are named [RestMembers] when any of
// them differs. Diff returns nil when the digests agree; an entry it cannot
// decode counts as differing.
func (d Digests) Diff(e Digests) []string {
	a, b := d.entries(), e.entries()
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
	for i, n := range names {
		if n == restName {
			names[i] = RestMembers
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// restName is the rest entry's name in entries: not valid UTF-8, so no
// member's decoded name (always valid UTF-8) can be it.
const restName = "\xff"

// entries decodes d by name, the rest entry under restName.
func (d Digests) entries() map[string]string {
	m := make(map[string]string)
	for s := string(d); s != ""; {
		var kv string
		kv, s, _ = strings.Cut(s, "&")
		k, v, _ := strings.Cut(kv, "=")
		name := restName
		if k != restKey {
			var err error
			if name, err = url.QueryUnescape(k); err != nil {
				name = k
			}
		}
		m[name] = v
	}
	return m
}
