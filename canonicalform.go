package idem

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// MaxFormDepth is the most segments a form field name may have (the name
// before its first bracket and each bracketed segment: metadata[order] has
// two) for [CanonicalForm] to accept the body.
const MaxFormDepth = 64

// ErrInvalidForm: a body declared as application/x-www-form-urlencoded has
// no canonical form (a malformed percent escape, a ';' separator, a name
// nested too deep). See [FormError].
var ErrInvalidForm = errors.New("idem: form body has no canonical form")

// FormError says where and why a form body has no canonical form. It never
// quotes the body.
type FormError struct {
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Reason says what is wrong.
	Reason string
}

func (e *FormError) Error() string {
	return "idem: form body at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Is reports ErrInvalidForm.
func (e *FormError) Is(target error) bool { return target == ErrInvalidForm }

// CanonicalForm returns the canonical form of the application/x-www-form-urlencoded
// body src, or a [*FormError] if it has none.
//
// Two bodies that every common form parser (Go's url.ParseQuery, Rack's
// nested parameters as Stripe reads them, PHP's) reads alike canonicalise
// to the same bytes, so a retry whose client re-encoded its parameters
// still matches its fingerprint; two bodies that some parser reads
// differently never do. The rules:
//
//   - Each name and value is percent-decoded ('+' is a space) and
//     re-encoded one way: letters, digits and "-_.~" as themselves, a space
//     as '+', every other byte as %XX in upper case. So "a%5Bb%5D=x+y",
//     "a[b]=x%20y" and "%61[b]=x%20y" are one parameter. A name without
//     '=' stays apart from one with an empty value ("a" is not "a=").
//   - Empty parameters ("a=1&&b=2", a trailing '&') are dropped.
//   - Parameters are reordered only where no parser can tell: a name is read
//     as a path, its part before the first '[' and then each bracketed
//     segment (items[0][price] is items, 0, price), cut before the first
//     empty segment, which appends to a list (items[][price] is items).
//     Two parameters keep their order when one's path is a prefix of the
//     other's (the same name, a list and its members, a value and a
//     nesting under it); any others are sorted, by the bytes of their
//     decoded path segments. So metadata[b]=2&metadata[a]=1 equals
//     metadata[a]=1&metadata[b]=2, items[1][price]=q&items[0][price]=p
//     equals its reverse, while a=1&a=2 differs from a=2&a=1, and
//     items[][price]=p&items[][qty]=1 from items[][qty]=1&items[][price]=p
//     (Rack groups list members by the order of their fields).
//   - A name that is not a plain path (it is empty, starts with '[', has
//     a ']' without its '[', or anything after its last ']') keeps its
//     place relative to every other parameter: parsers disagree on what it
//     means.
//   - An unescaped ';' is refused (some parsers split parameters on it,
//     others do not: encoders always escape it), as are a malformed percent
//     escape and a name of more than [MaxFormDepth] segments. A caller that
//     hashes such a body as bytes instead ([BodyHasher]) still matches a
//     byte-identical retry.
//
// There is no other normalisation: "é" and "e\u0301" stay different, so do
// "01" and "1", and a parser that merges repeated names is not assumed.
func CanonicalForm(src []byte) ([]byte, error) {
	out, err := AppendCanonicalForm(make([]byte, 0, len(src)+8), src)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonicalForm appends the canonical form of the form body src to
// dst, which must not overlap src. On error it returns dst unchanged and a
// [*FormError]. It is safe for concurrent use. The rules are described at
// [CanonicalForm].
func AppendCanonicalForm(dst, src []byte) ([]byte, error) {
	f := formPool.Get().(*formCanon)
	defer f.release()
	if err := f.parse(src); err != nil {
		return dst, err
	}
	return f.appendCanonical(dst), nil
}

// formParam is one parameter: its decoded name and value are spans of
// formCanon.buf, its path's segments spans listed in formCanon.segs.
type formParam struct {
	nameStart, nameEnd, valueEnd int32 // the value follows the name in buf
	hasEq                        bool
	// segOff and depth locate the path's segments: segs[segOff:segOff+2*depth]
	// are (start, end) pairs into buf. A depth of 0 is a name that is not
	// a plain path, which keeps its place relative to every parameter.
	segOff, depth int32
}

// formCanon is one parse and ordering, pooled.
type formCanon struct {
	buf    []byte // decoded names and values
	params []formParam
	segs   []int32
	order  []int32 // parameter indexes in canonical order
	idx    []int32 // scratch: indexes being ordered
	text   []byte  // scratch: one parameter's canonical text
}

var formPool = sync.Pool{New: func() any { return new(formCanon) }}

func (f *formCanon) release() {
	f.buf, f.params, f.segs = f.buf[:0], f.params[:0], f.segs[:0]
	f.order, f.idx, f.text = f.order[:0], f.idx[:0], f.text[:0]
	if cap(f.buf) > 64<<10 {
		f.buf = nil
	}
	if cap(f.params) > 4<<10 {
		f.params, f.order, f.idx = nil, nil, nil
	}
	if cap(f.segs) > 16<<10 {
		f.segs = nil
	}
	formPool.Put(f)
}

// parse decodes src's parameters and puts them in canonical order.
func (f *formCanon) parse(src []byte) error {
	if cap(f.buf) < len(src) {
		f.buf = make([]byte, 0, len(src))
	}
	for off := 0; off < len(src); {
		end := bytes.IndexByte(src[off:], '&')
		if end < 0 {
			end = len(src)
		} else {
			end += off
		}
		if end > off {
			if err := f.param(src, off, end); err != nil {
				return err
			}
		}
		off = end + 1
	}
	f.idx = f.idx[:0]
	for i := range f.params {
		f.idx = append(f.idx, int32(i))
	}
	f.order = f.orderLevel(0, f.idx, f.order[:0])
	return nil
}

// param decodes the parameter src[off:end].
func (f *formCanon) param(src []byte, off, end int) error {
	p := formParam{nameStart: int32(len(f.buf))}
	nameEnd := end
	if eq := bytes.IndexByte(src[off:end], '='); eq >= 0 {
		nameEnd, p.hasEq = off+eq, true
	}
	var err error
	if f.buf, err = appendFormDecoded(f.buf, src, off, nameEnd); err != nil {
		return err
	}
	p.nameEnd = int32(len(f.buf))
	if p.hasEq {
		if f.buf, err = appendFormDecoded(f.buf, src, nameEnd+1, end); err != nil {
			return err
		}
	}
	p.valueEnd = int32(len(f.buf))
	p.segOff = int32(len(f.segs))
	depth, ok := f.path(int(p.nameStart), int(p.nameEnd))
	if !ok {
		return &FormError{Offset: off, Reason: "a parameter name has more than " + strconv.Itoa(MaxFormDepth) + " segments"}
	}
	p.depth = int32(depth)
	f.params = append(f.params, p)
	return nil
}

// appendFormDecoded appends src[off:end] percent-decoded, '+' as a space.
func appendFormDecoded(dst, src []byte, off, end int) ([]byte, error) {
	for i := off; i < end; i++ {
		switch c := src[i]; c {
		case '+':
			dst = append(dst, ' ')
		case ';':
			return dst, &FormError{Offset: i, Reason: "an unescaped ';' (parsers disagree on whether it separates parameters)"}
		case '%':
			if i+2 >= end || !isHex(src[i+1]) || !isHex(src[i+2]) {
				return dst, &FormError{Offset: i, Reason: "a malformed percent escape"}
			}
			dst = append(dst, unhex(src[i+1])<<4|unhex(src[i+2]))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// path appends to segs the segments of the decoded name buf[start:end] up
// to its first empty one, and returns how many: 0 when the name is not a
// plain path (empty, or brackets out of place). ok is false past
// MaxFormDepth segments.
func (f *formCanon) path(start, end int) (depth int, ok bool) {
	name := f.buf[start:end]
	root := bytes.IndexAny(name, "[]")
	if len(name) == 0 {
		return 0, true
	}
	if root < 0 {
		f.segs = append(f.segs, int32(start), int32(end))
		return 1, true
	}
	if root == 0 || name[root] != '[' {
		return 0, true
	}
	mark := len(f.segs)
	f.segs = append(f.segs, int32(start), int32(start+root))
	depth, list, n := 1, false, 1
	for i := root; i < len(name); {
		if name[i] != '[' {
			f.segs = f.segs[:mark] // something after a ']'
			return 0, true
		}
		j := bytes.IndexAny(name[i+1:], "[]")
		if j < 0 || name[i+1+j] != ']' {
			f.segs = f.segs[:mark] // an unclosed '[' or a '[' inside one
			return 0, true
		}
		seg := name[i+1 : i+1+j]
		if n++; n > MaxFormDepth {
			f.segs = f.segs[:mark]
			return 0, false
		}
		if len(seg) == 0 {
			list = true // the path stops at the list
		}
		if !list {
			f.segs = append(f.segs, int32(start+i+1), int32(start+i+1+j))
			depth++
		}
		i += j + 2
	}
	return depth, true
}

// seg is parameter i's path segment at level d (d < its depth).
func (f *formCanon) seg(i int32, d int) []byte {
	p := &f.params[i]
	o := int(p.segOff) + 2*d
	return f.buf[f.segs[o]:f.segs[o+1]]
}

// orderLevel appends to out, in canonical order, the parameters idx (in
// input order), whose paths all share their first d segments: those whose
// path ends at d keep their places; between them, the others are grouped
// by their next segment, groups sorted, each ordered one level down.
func (f *formCanon) orderLevel(d int, idx, out []int32) []int32 {
	start := 0
	for i := 0; i <= len(idx); i++ {
		if i < len(idx) && int(f.params[idx[i]].depth) != d {
			continue
		}
		out = f.orderGroups(d, idx[start:i], out)
		if i < len(idx) {
			out = append(out, idx[i])
		}
		start = i + 1
	}
	return out
}

// orderGroups orders parameters whose paths are longer than d by their
// segment d (stably: equal segments keep their order), each group one
// level down. It sorts idx in place.
func (f *formCanon) orderGroups(d int, idx, out []int32) []int32 {
	if len(idx) == 0 {
		return out
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return bytes.Compare(f.seg(a, d), f.seg(b, d)) })
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && bytes.Equal(f.seg(idx[j], d), f.seg(idx[i], d)) {
			j++
		}
		out = f.orderLevel(d+1, idx[i:j], out)
		i = j
	}
	return out
}

// appendParam appends parameter i's canonical text.
func (f *formCanon) appendParam(dst []byte, i int32) []byte {
	p := &f.params[i]
	for _, c := range f.buf[p.nameStart:p.nameEnd] {
		dst = appendQueryByte(dst, c)
	}
	if p.hasEq {
		dst = append(dst, '=')
		for _, c := range f.buf[p.nameEnd:p.valueEnd] {
			dst = appendQueryByte(dst, c)
		}
	}
	return dst
}

// appendCanonical appends the parameters' canonical texts, in canonical
// order, joined by '&'.
func (f *formCanon) appendCanonical(dst []byte) []byte {
	for k, i := range f.order {
		if k > 0 {
			dst = append(dst, '&')
		}
		dst = f.appendParam(dst, i)
	}
	return dst
}

// field is the name a parameter's digest is filed under: the first
// segment of its path (metadata for metadata[order]), or the whole name
// when it is not a plain path.
func (f *formCanon) field(i int32) []byte {
	p := &f.params[i]
	if p.depth == 0 {
		return f.buf[p.nameStart:p.nameEnd]
	}
	return f.seg(i, 0)
}

// appendDigests appends the encoded digests of the parameters, one entry
// per field (see field), sorted by its bytes: the XXH64 of the field's
// parameters' canonical texts, in canonical order, joined by '&'. The
// first limit fields get entries of their own, as appendDigests does for
// a JSON object; the rest share one.
func (f *formCanon) appendDigests(dst []byte, limit int) []byte {
	f.idx = append(f.idx[:0], f.order...)
	slices.SortStableFunc(f.idx, func(a, b int32) int { return bytes.Compare(f.field(a), f.field(b)) })
	start := len(dst)
	for i := 0; i < len(f.idx); {
		name := f.field(f.idx[i])
		j := i + 1
		for j < len(f.idx) && bytes.Equal(f.field(f.idx[j]), name) {
			j++
		}
		if limit <= 0 || len(dst)-start+queryEscapedLen(name)+18 > maxDigestsLen {
			return appendDigestSum(appendEntry(dst, start), []byte(restKey), f.sum(f.idx[i:]))
		}
		dst = appendEntry(dst, start)
		for _, c := range name {
			dst = appendQueryByte(dst, c)
		}
		dst = appendDigestSum(dst, nil, f.sum(f.idx[i:j]))
		limit--
		i = j
	}
	return dst
}

// sum is the XXH64 of the canonical texts of the parameters idx, joined
// by '&'.
func (f *formCanon) sum(idx []int32) uint64 {
	d := xxhash.New()
	for k, i := range idx {
		f.text = f.text[:0]
		if k > 0 {
			f.text = append(f.text, '&')
		}
		f.text = f.appendParam(f.text, i)
		_, _ = d.Write(f.text)
	}
	return d.Sum64()
}

// queryEscapedLen is the length of s escaped by appendQueryByte.
func queryEscapedLen(s []byte) int {
	n := 0
	for _, c := range s {
		n += 3
		if queryPlain(c) {
			n -= 2
		}
	}
	return n
}
