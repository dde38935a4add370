package idemhttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
)

// The binary record format (version 2), documented in docs/http.md:
//
//	0x00                     marker: never the first byte of a JSON text
//	0x02                     version
//	flags                    bit 0: too large; the other bits are zero
//	uvarint status
//	uvarint header count     then, per header:
//	  uvarint len, name
//	  uvarint value count    then, per value: uvarint len, value
//	too large: uvarint size  and nothing after it
//	otherwise: body          every remaining byte
//
// Integers are unsigned LEB128 varints (encoding/binary's Uvarint). A
// recorded body is whole, so its size is its length.
const (
	recordMarker  = 0x00
	recordVersion = 2
	flagTooLarge  = 1 << 0

	// prefixLen is the marker, version and flags.
	prefixLen = 3
)

var errTruncated = errors.New("idemhttp: recorded response: truncated")

// appendPrelude appends the prefix, status and the headers of h named in
// names (sorted here, so that equal responses encode equally).
func appendPrelude(b []byte, status int, h http.Header, names []string) []byte {
	slices.Sort(names)
	b = append(b, recordMarker, recordVersion, 0)
	b = binary.AppendUvarint(b, uint64(status))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendString(b, k)
		vs := h[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// markTooLarge completes a record that is only a prelude with the
// too-large flag and the size that was sent.
func markTooLarge(prelude []byte, size int64) []byte {
	prelude[2] |= flagTooLarge
	return binary.AppendUvarint(prelude, uint64(max(size, 0)))
}

// recordView is a parsed record that still points into its bytes, so a
// replay writes it without building a RecordedResponse.
type recordView struct {
	status   int
	tooLarge bool
	size     int64
	headers  []byte // the header entries, validated
	nHeaders int
	nValues  int
	body     []byte
}

// parseRecord validates a version 2 record. It refuses any other version
// with an error that names it.
func parseRecord(b []byte) (recordView, error) {
	var v recordView
	if len(b) < prefixLen {
		return v, errTruncated
	}
	if b[0] != recordMarker {
		return v, fmt.Errorf("idemhttp: recorded response: unrecognised encoding (first byte 0x%02x)", b[0])
	}
	if b[1] != recordVersion {
		return v, fmt.Errorf("idemhttp: recorded response: unsupported format version %d (this build reads 1 and 2)", b[1])
	}
	if b[2]&^flagTooLarge != 0 {
		return v, fmt.Errorf("idemhttp: recorded response: unknown flags 0x%02x", b[2])
	}
	v.tooLarge = b[2]&flagTooLarge != 0
	p := reader{b: b, off: prefixLen}
	status := p.uvarint()
	if p.err == nil && (status < 100 || status > 999) {
		return v, errors.New("idemhttp: recorded response: invalid status")
	}
	v.status = int(status)
	v.nHeaders = p.count()
	start := p.off
	for range v.nHeaders {
		p.bytes()
		n := p.count()
		v.nValues += n
		for range n {
			p.bytes()
		}
	}
	if p.err != nil {
		return v, p.err
	}
	v.headers = b[start:p.off]
	if !v.tooLarge {
		v.body = b[p.off:]
		v.size = int64(len(v.body))
		return v, nil
	}
	size := p.uvarint()
	switch {
	case p.err != nil:
		return v, p.err
	case size > math.MaxInt64:
		return v, errors.New("idemhttp: recorded response: invalid size")
	case p.off != len(b):
		return v, errors.New("idemhttp: recorded response: data after a too-large record")
	}
	v.size = int64(size)
	return v, nil
}

// eachHeader calls fn for each recorded header. The names and values share
// one string and one slice (each value slice capped to its own length), so
// a replay costs two allocations whatever the number of headers. The slice
// is all when it holds nValues strings (the caller's), else a new one.
func (v *recordView) eachHeader(all []string, fn func(name string, vals []string)) {
	if v.nHeaders == 0 {
		return
	}
	s := string(v.headers)
	if all == nil || len(all) < v.nValues {
		all = make([]string, v.nValues)
	}
	p := reader{b: v.headers}
	for range v.nHeaders {
		name := p.str(s)
		n := p.count()
		vals := all[:n:n]
		all = all[n:]
		for i := range vals {
			vals[i] = p.str(s)
		}
		fn(name, vals)
	}
}

// reader walks a record, remembering the first error; lengths and counts
// are bounded by the bytes left, so a hostile record cannot make it
// allocate more than its own size.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.off += n
	return x
}

// count reads a count of entries that each take at least one byte.
func (r *reader) count() int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)-r.off) {
		r.err = errTruncated
		return 0
	}
	return int(n)
}

// bytes skips a length-prefixed string and returns its span.
func (r *reader) bytes() (start, end int) {
	n := r.count()
	if r.err != nil {
		return r.off, r.off
	}
	start = r.off
	r.off += n
	return start, r.off
}

// str returns the length-prefixed string at the cursor as a substring of
// s, which holds the same bytes as r.b.
func (r *reader) str(s string) string {
	start, end := r.bytes()
	return s[start:end]
}
