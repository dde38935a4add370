package idem

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// encodeIntent returns json.Marshal(in), byte for byte, without reflection:
// the journal is encoded on every claim.
func encodeIntent(in *Intent) []byte {
	var arr [8]string
	keys := arr[:0]
	var v0 string // the value of a single field, saving its lookup
	n := 16 + len(in.Operation) + len(in.Currency) + len(in.Counterparty) + len(in.ForwardKey) + len(in.Origin)
	for k, v := range in.Fields {
		keys = append(keys, k)
		v0 = v
		n += len(k) + len(v) + 6
	}
	b := make([]byte, 0, n+48)
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if in.Operation != "" {
		field("operation")
		b = appendJSONString(b, in.Operation)
	}
	if in.Amount != 0 {
		field("amount")
		b = strconv.AppendInt(b, in.Amount, 10)
	}
	if in.Currency != "" {
		field("currency")
		b = appendJSONString(b, in.Currency)
	}
	if in.Counterparty != "" {
		field("counterparty")
		b = appendJSONString(b, in.Counterparty)
	}
	if in.ForwardKey != "" {
		field("forward_key")
		b = appendJSONString(b, in.ForwardKey)
	}
	if in.Origin != "" {
		field("origin")
		b = appendJSONString(b, in.Origin)
	}
	if len(in.Fields) > 0 {
		field("fields")
		b = append(b, '{')
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if len(keys) > 1 {
				v0 = in.Fields[k]
			}
			b = appendJSONString(b, v0)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes a string: HTML
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = appendEscapedASCII(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonSafe marks the ASCII bytes encoding/json writes as they are (with
// HTML escaping on); bytes from 0x80 are not, they start a UTF-8 sequence.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const lowerHex = "0123456789abcdef"

// appendEscapedASCII appends the escape of the ASCII byte c inside a JSON
// string: \" and \\, the short escape of a control character that has one,
// and \u00XX for any other. Both of the package's JSON writers use it: the
// canonical form (which escapes only what JSON requires) and
// appendJSONString (which also escapes HTML characters).
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '\\', '"':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
}
