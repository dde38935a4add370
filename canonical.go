package idem

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of arrays and objects that
// [CanonicalJSON] accepts.
const MaxJSONDepth = 512

// maxExpDigits bounds the significant digits of a number's exponent so that
// exponent arithmetic can never overflow int64.
const maxExpDigits = 18

// maxExp is the least exponent magnitude of more than maxExpDigits digits.
const maxExp = 1_000_000_000_000_000_000

var (
	// ErrInvalidJSON: a body declared as JSON is not valid, or breaks one of
	// the canonical form's rules (duplicate member, invalid UTF-8, lone
	// surrogate, too deep, absurd exponent). See [JSONError].
	ErrInvalidJSON = errors.New("idem: invalid JSON")
	// ErrDuplicateMember: a JSON object names the same member twice. It is
	// reported as a [*JSONError] that matches both this and [ErrInvalidJSON].
	ErrDuplicateMember = errors.New("idem: duplicate JSON object member")
)

// JSONError says where and why a body is not acceptable JSON. It never
// quotes the body.
type JSONError struct {
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Reason says what is wrong.
	Reason string

	duplicate bool
}

func (e *JSONError) Error() string {
	return "idem: invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Is reports ErrInvalidJSON, and ErrDuplicateMember for a duplicate member.
func (e *JSONError) Is(target error) bool {
	return target == ErrInvalidJSON || e.duplicate && target == ErrDuplicateMember
}

// CanonicalJSON returns the canonical form of the JSON document src, or a
// [*JSONError] if src is not acceptable.
//
// Two JSON documents that mean the same thing canonicalise to the same bytes,
// so a retried request whose client re-serialised its body still matches its
// fingerprint. Two documents that mean different things never do. The rules:
//
//   - Insignificant whitespace is dropped and object members are sorted by
//     the UTF-8 bytes of their decoded names. RFC 8785 (JCS) sorts by UTF-16
//     code units instead; the two orders differ only when names mix
//     characters above U+FFFF with characters in U+E000..U+FFFF. Any fixed
//     total order gives a canonical form, and the output is only hashed, never
//     compared with another implementation's, so the simpler byte order is
//     used. (The number form below is not JCS's either: this is not RFC 8785.)
//   - Duplicate member names (compared after unescaping) are an error
//     ([ErrDuplicateMember]), never merged: parsers disagree on which
//     duplicate wins, so such a body has no single meaning.
//   - Numbers are compared by exact decimal value, never through float64:
//     9007199254740992 and 9007199254740993 differ. Numerically equal
//     decimals are equal: 1, 1.0, 1e0 and 10e-1 all become 1, and -0 becomes
//     0. A JSON number carries no type, and a client that re-serialises 1.0
//     as 1 has not changed its request. The output uses the ECMAScript
//     number-to-string layout with exact digits: plain digits when the
//     decimal point falls within 21 digits (100, 1.5, 0.000001), otherwise
//     one digit, a fraction and an exponent (1e+21, 1.5e-7). An exponent of
//     more than 18 significant digits is refused rather than risk int64
//     overflow, and so is a number whose own exponent (as d.ddd×10^n) would
//     need more: |n| must stay below 10^18.
//   - Strings are unescaped (surrogate pairs included) and re-escaped
//     canonically: only '"', '\\' and control characters are escaped, as \b,
//     \f, \n, \r, \t or \u00xx with lower-case hex. Invalid UTF-8 and lone
//     surrogates are errors: replacing them with U+FFFD would make two
//     different inputs equal. There is no Unicode normalisation: "é" and
//     "e\u0301" stay different.
//   - Nesting deeper than [MaxJSONDepth], an empty input and anything after
//     the value are errors.
func CanonicalJSON(src []byte) ([]byte, error) {
	out, err := AppendCanonicalJSON(make([]byte, 0, len(src)+8), src)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonicalJSON appends the canonical form of the JSON document src to
// dst, which must not overlap src. On error it returns dst unchanged and a
// [*JSONError]. It is safe for concurrent use. The canonical form and the
// rules are described at [CanonicalJSON].
func AppendCanonicalJSON(dst, src []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.src, c.out = src, dst
	if err := c.document(); err != nil {
		return dst, err
	}
	return c.out, nil
}

// canonicalizer is one single-pass parse. It writes the canonical form
// straight to out; an object's members are written in input order and then
// moved into sorted order in place.
type canonicalizer struct {
	src     []byte
	out     []byte
	members []member // spans of the objects being parsed, innermost last
	tmp     []byte   // scratch: an object's members while they are reordered
	digits  []byte   // scratch: a number's significant digits
	own     []byte   // output buffer for callers that only hash the result
}

// member is one object member's span in out: the name is
// out[start:nameEnd] (quotes included), the value ends at end.
type member struct {
	start, nameEnd, end int
	srcOff              int  // offset of the name in src, for errors
	escaped             bool // the canonical name holds an escape
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// release returns c to the pool, dropping large scratch buffers so that one
// huge body does not pin its memory.
func (c *canonicalizer) release() {
	c.src, c.out = nil, nil
	c.members = c.members[:0]
	if cap(c.tmp) > 64<<10 {
		c.tmp = nil
	}
	if cap(c.digits) > 4<<10 {
		c.digits = nil
	}
	if cap(c.own) > 64<<10 {
		c.own = nil
	}
	canonPool.Put(c)
}

func (c *canonicalizer) fail(off int, reason string) error {
	return &JSONError{Offset: off, Reason: reason}
}

func (c *canonicalizer) document() error {
	i := c.skipSpace(0)
	if i == len(c.src) {
		return c.fail(i, "empty input")
	}
	i, err := c.value(i, 0)
	if err != nil {
		return err
	}
	if i = c.skipSpace(i); i != len(c.src) {
		return c.fail(i, "data after the top-level value")
	}
	return nil
}

func (c *canonicalizer) skipSpace(i int) int {
	for i < len(c.src) {
		switch c.src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value parses the value at src[i] (which is not whitespace) and returns the
// offset just after it. depth counts the arrays and objects around it.
func (c *canonicalizer) value(i, depth int) (int, error) {
	if i >= len(c.src) {
		return i, c.fail(i, "unexpected end of input")
	}
	switch b := c.src[i]; {
	case b == '{':
		return c.object(i, depth+1)
	case b == '[':
		return c.array(i, depth+1)
	case b == '"':
		return c.string(i)
	case b == '-' || b >= '0' && b <= '9':
		return c.number(i)
	case b == 't':
		return c.literal(i, "true")
	case b == 'f':
		return c.literal(i, "false")
	case b == 'n':
		return c.literal(i, "null")
	}
	return i, c.fail(i, "unexpected character")
}

func (c *canonicalizer) literal(i int, lit string) (int, error) {
	if len(c.src)-i < len(lit) || string(c.src[i:i+len(lit)]) != lit {
		return i, c.fail(i, "invalid literal")
	}
	c.out = append(c.out, lit...)
	return i + len(lit), nil
}

func (c *canonicalizer) array(i, depth int) (int, error) {
	if depth > MaxJSONDepth {
		return i, c.fail(i, "nested deeper than "+strconv.Itoa(MaxJSONDepth))
	}
	c.out = append(c.out, '[')
	i = c.skipSpace(i + 1)
	if i < len(c.src) && c.src[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth); err != nil {
			return i, err
		}
		i = c.skipSpace(i)
		if i >= len(c.src) {
			return i, c.fail(i, "unterminated array")
		}
		switch c.src[i] {
		case ',':
			c.out = append(c.out, ',')
			i = c.skipSpace(i + 1)
		case ']':
			c.out = append(c.out, ']')
			return i + 1, nil
		default:
			return i, c.fail(i, "expected ',' or ']' in array")
		}
	}
}

func (c *canonicalizer) object(i, depth int) (int, error) {
	if depth > MaxJSONDepth {
		return i, c.fail(i, "nested deeper than "+strconv.Itoa(MaxJSONDepth))
	}
	c.out = append(c.out, '{')
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	i = c.skipSpace(i + 1)
	if i < len(c.src) && c.src[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.member(i, depth); err != nil {
			return i, err
		}
		i = c.skipSpace(i)
		if i >= len(c.src) {
			return i, c.fail(i, "unterminated object")
		}
		switch c.src[i] {
		case ',':
			c.out = append(c.out, ',')
			i = c.skipSpace(i + 1)
		case '}':
			if err := c.sortMembers(c.members[base:]); err != nil {
				return i, err
			}
			c.out = append(c.out, '}')
			return i + 1, nil
		default:
			return i, c.fail(i, "expected ',' or '}' in object")
		}
	}
}

// member parses `"name": value` at src[i] and records its span.
func (c *canonicalizer) member(i, depth int) (int, error) {
	if i >= len(c.src) || c.src[i] != '"' {
		return i, c.fail(i, "expected a member name")
	}
	m := member{start: len(c.out), srcOff: i}
	i, err := c.string(i)
	if err != nil {
		return i, err
	}
	m.nameEnd = len(c.out)
	m.escaped = bytes.IndexByte(c.out[m.start+1:m.nameEnd-1], '\\') >= 0
	if i = c.skipSpace(i); i >= len(c.src) || c.src[i] != ':' {
		return i, c.fail(i, "expected ':' after member name")
	}
	c.out = append(c.out, ':')
	if i, err = c.value(c.skipSpace(i+1), depth); err != nil {
		return i, err
	}
	m.end = len(c.out)
	c.members = append(c.members, m)
	return i, nil
}

// sortMembers puts the object's members, already written to out in input
// order, into name order, and refuses duplicate names. Objects are mostly
// small and often sorted already, so an insertion sort (which also meets
// every duplicate on the way) does the work; large objects use pdqsort.
func (c *canonicalizer) sortMembers(ms []member) error {
	if len(ms) < 2 {
		return nil
	}
	lo, hi := ms[0].start, ms[len(ms)-1].end
	moved := false
	if len(ms) > 32 {
		slices.SortFunc(ms, c.compareNames)
		for j := 1; j < len(ms); j++ {
			if c.compareNames(ms[j-1], ms[j]) == 0 {
				return c.duplicate(ms[j-1], ms[j])
			}
		}
		moved = true
	} else {
		for j := 1; j < len(ms); j++ {
			m, k := ms[j], j
			for ; k > 0; k-- {
				cmp := c.compareNames(ms[k-1], m)
				if cmp == 0 {
					return c.duplicate(ms[k-1], m)
				}
				if cmp < 0 {
					break
				}
				ms[k] = ms[k-1]
			}
			if k != j {
				ms[k], moved = m, true
			}
		}
	}
	if !moved {
		return nil
	}
	c.tmp = append(c.tmp[:0], c.out[lo:hi]...)
	w := lo
	for j, m := range ms {
		if j > 0 {
			c.out[w] = ','
			w++
		}
		w += copy(c.out[w:], c.tmp[m.start-lo:m.end-lo])
	}
	return nil
}

func (c *canonicalizer) duplicate(a, b member) error {
	return &JSONError{Offset: max(a.srcOff, b.srcOff), Reason: "duplicate member name", duplicate: true}
}

// compareNames orders two members by the UTF-8 bytes of their decoded
// names. Canonical escapes do not preserve byte order ('"' is written as
// '\\' '"'), so escapes are decoded as the names are walked.
func (c *canonicalizer) compareNames(a, b member) int {
	x, y := c.out[a.start+1:a.nameEnd-1], c.out[b.start+1:b.nameEnd-1]
	if !a.escaped && !b.escaped {
		return bytes.Compare(x, y)
	}
	return compareEscaped(x, y)
}

func compareEscaped(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x, n := unescapeCanonicalByte(a, i)
		y, m := unescapeCanonicalByte(b, j)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
		i, j = i+n, j+m
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

// unescapeCanonicalByte decodes one byte of a canonically escaped string at
// s[i] and returns it with the length of its encoding. Every canonical
// escape stands for a single ASCII byte.
func unescapeCanonicalByte(s []byte, i int) (byte, int) {
	if s[i] != '\\' {
		return s[i], 1
	}
	switch s[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u': // \u00xx
		return unhex(s[i+4])<<4 | unhex(s[i+5]), 6
	}
	return s[i+1], 2 // '"' or '\\'
}

func unhex(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	case b >= 'A' && b <= 'F':
		return b - 'A' + 10
	}
	return 0xff
}

// string parses the string at src[i] (the opening quote) and writes its
// canonical encoding.
func (c *canonicalizer) string(i int) (int, error) {
	c.out = append(c.out, '"')
	i++
	run := i // start of bytes not yet copied
	for i < len(c.src) {
		b := c.src[i]
		if plainStringByte[b] {
			i++
			continue
		}
		switch {
		case b == '"':
			c.out = append(append(c.out, c.src[run:i]...), '"')
			return i + 1, nil
		case b == '\\':
			c.out = append(c.out, c.src[run:i]...)
			r, n, err := c.escape(i)
			if err != nil {
				return i, err
			}
			c.out = appendStringRune(c.out, r)
			i += n
			run = i
		case b < 0x20:
			return i, c.fail(i, "control character in string")
		default:
			r, n := utf8.DecodeRune(c.src[i:])
			if r == utf8.RuneError && n <= 1 {
				return i, c.fail(i, "invalid UTF-8 in string")
			}
			i += n
		}
	}
	return i, c.fail(i, "unterminated string")
}

// plainStringByte marks the bytes copied as they are inside a string:
// printable ASCII other than '"' and '\\'.
var plainStringByte = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// escape decodes the escape sequence at src[i] (a backslash), joining a
// surrogate pair, and returns the rune and the length consumed.
func (c *canonicalizer) escape(i int) (rune, int, error) {
	if i+1 >= len(c.src) {
		return 0, 0, c.fail(i, "unterminated string")
	}
	switch c.src[i+1] {
	case '"', '\\', '/':
		return rune(c.src[i+1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		return c.unicodeEscape(i)
	}
	return 0, 0, c.fail(i, "invalid escape sequence")
}

func (c *canonicalizer) unicodeEscape(i int) (rune, int, error) {
	r, ok := hex4(c.src, i+2)
	if !ok {
		return 0, 0, c.fail(i, "invalid \\u escape")
	}
	switch {
	case r >= 0xdc00 && r < 0xe000:
		return 0, 0, c.fail(i, "lone low surrogate")
	case r < 0xd800 || r >= 0xe000:
		return r, 6, nil
	}
	if len(c.src)-i < 12 || c.src[i+6] != '\\' || c.src[i+7] != 'u' {
		return 0, 0, c.fail(i, "lone high surrogate")
	}
	lo, ok := hex4(c.src, i+8)
	if !ok || lo < 0xdc00 || lo >= 0xe000 {
		return 0, 0, c.fail(i, "lone high surrogate")
	}
	return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), 12, nil
}

func hex4(s []byte, i int) (rune, bool) {
	if len(s)-i < 4 {
		return 0, false
	}
	var r rune
	for _, b := range s[i : i+4] {
		h := unhex(b)
		if h > 15 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// appendStringRune writes r as it appears inside a canonical string: a
// quote, a backslash and control characters escaped, nothing else.
func appendStringRune(out []byte, r rune) []byte {
	if r == '"' || r == '\\' || r < 0x20 {
		return appendEscapedASCII(out, byte(r))
	}
	return utf8.AppendRune(out, r)
}

// number parses the number at src[i] and writes its canonical form: the
// value is digits × 10^exp with the digits stripped of leading and trailing
// zeros, so equal values meet in one form.
func (c *canonicalizer) number(i int) (int, error) {
	start := i
	neg := c.src[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i < len(c.src) && c.src[i] == '0':
		i++
	case i < len(c.src) && c.src[i] >= '1' && c.src[i] <= '9':
		i = c.skipDigits(i)
	default:
		return i, c.fail(i, "invalid number")
	}
	intEnd, fracStart, fracEnd := i, i, i
	if i < len(c.src) && c.src[i] == '.' {
		fracStart = i + 1
		if i = c.skipDigits(fracStart); i == fracStart {
			return i, c.fail(i, "invalid number: no digits after '.'")
		}
		fracEnd = i
	}
	exp, i, err := c.exponent(i)
	if err != nil {
		return i, err
	}
	c.digits = append(append(c.digits[:0], c.src[intStart:intEnd]...), c.src[fracStart:fracEnd]...)
	d := c.digits
	for len(d) > 0 && d[0] == '0' {
		d = d[1:]
	}
	exp -= int64(fracEnd - fracStart)
	for len(d) > 0 && d[len(d)-1] == '0' {
		d = d[:len(d)-1]
		exp++
	}
	// The output may carry the exponent of d.ddd×10^sci; keep it within
	// maxExpDigits too, or the output would not canonicalise again.
	if sci := int64(len(d)) + exp - 1; len(d) > 0 && (sci >= maxExp || sci <= -maxExp) {
		return i, c.fail(start, "number out of range")
	}
	c.out = appendDecimal(c.out, neg, d, exp)
	return i, nil
}

func (c *canonicalizer) skipDigits(i int) int {
	for i < len(c.src) && c.src[i] >= '0' && c.src[i] <= '9' {
		i++
	}
	return i
}

// exponent parses an optional exponent at src[i].
func (c *canonicalizer) exponent(i int) (int64, int, error) {
	if i >= len(c.src) || c.src[i] != 'e' && c.src[i] != 'E' {
		return 0, i, nil
	}
	i++
	neg := false
	if i < len(c.src) && (c.src[i] == '+' || c.src[i] == '-') {
		neg = c.src[i] == '-'
		i++
	}
	ds := i
	if i = c.skipDigits(i); i == ds {
		return 0, i, c.fail(i, "invalid number: no digits in exponent")
	}
	for ds < i && c.src[ds] == '0' {
		ds++
	}
	if i-ds > maxExpDigits {
		return 0, i, c.fail(ds, "number exponent out of range")
	}
	var e int64
	for _, b := range c.src[ds:i] {
		e = e*10 + int64(b-'0')
	}
	if neg {
		e = -e
	}
	return e, i, nil
}

// appendDecimal writes ±d × 10^exp (d without leading or trailing zeros) in
// the ECMAScript layout, with every digit kept.
func appendDecimal(out []byte, neg bool, d []byte, exp int64) []byte {
	if len(d) == 0 {
		return append(out, '0') // -0 is 0
	}
	if neg {
		out = append(out, '-')
	}
	k := int64(len(d))
	n := k + exp // position of the decimal point
	switch {
	case k <= n && n <= 21:
		out = append(out, d...)
		for ; k < n; k++ {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(append(append(out, d[:n]...), '.'), d[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for ; n < 0; n++ {
			out = append(out, '0')
		}
		out = append(out, d...)
	default:
		out = append(out, d[0])
		if k > 1 {
			out = append(append(out, '.'), d[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, n-1, 10)
	}
	return out
}
