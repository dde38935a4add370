package redisstore

import (
	"strings"
)

// recKey names the record's Redis key, "{prefix}:{<tag>}:rec". The hash
// tag {…} holds the escaped scope and key, so the record and its
// notification channel (chanKey) hash to the same Cluster slot.
func (s *Store) recKey(scope, key string) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(scope) + len(key) + 10)
	b.WriteString(s.prefix)
	b.WriteString(":{")
	escapeTagPart(&b, scope)
	b.WriteByte(':')
	escapeTagPart(&b, key)
	b.WriteString("}:rec")
	return b.String()
}

// recChanKeys returns recKey and chanKey of a record, built in one
// allocation.
func (s *Store) recChanKeys(scope, key string) (rec, ch string) {
	var b strings.Builder
	n := len(s.prefix) + len(scope) + len(key) + 4
	b.Grow(2*n + 16)
	for i, suffix := range [2]string{"}:rec", "}:ch"} {
		if i == 1 {
			n = b.Len()
		}
		b.WriteString(s.prefix)
		b.WriteString(":{")
		escapeTagPart(&b, scope)
		b.WriteByte(':')
		escapeTagPart(&b, key)
		b.WriteString(suffix)
	}
	both := b.String()
	return both[:n], both[n:]
}

// chanKey names the notification channel of the record at rec:
// "{prefix}:{<tag>}:ch".
func chanKey(rec string) string {
	return rec[:len(rec)-len("rec")] + "ch"
}

// escapeTagPart writes one part of a record's hash tag: '%', ':', '{', '}'
// and bytes outside printable ASCII are percent-encoded, and recKey joins
// the scope's and key's parts with ':', so two different pairs never give
// the same tag and the tag never contains a brace (which would end it).
const hexDigits = "0123456789ABCDEF"

func escapeTagPart(b *strings.Builder, p string) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' || c == ':' || c == '{' || c == '}' || c < 0x21 || c > 0x7e {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// globEscape escapes the characters SCAN MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// scanPattern matches every record key of the store, or of one scope.
func (s *Store) scanPattern(scope string) string {
	if scope == "" {
		return globEscape(s.prefix) + ":{*}:rec"
	}
	var b strings.Builder
	escapeTagPart(&b, scope)
	return globEscape(s.prefix) + ":{" + globEscape(b.String()) + ":*}:rec"
}
