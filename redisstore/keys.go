package redisstore

import (
	"strings"
)

// keys names the Redis keys of one record. The hash tag {…} holds the
// escaped scope and key, so the record hash and its notification channel
// hash to the same Cluster slot.
type keys struct {
	rec string // the record hash
	ch  string // the notification channel
}

func (s *Store) keysFor(scope, key string) keys {
	tag := recordTag(scope, key)
	return keys{
		rec: s.prefix + ":{" + tag + "}:rec",
		ch:  s.prefix + ":{" + tag + "}:ch",
	}
}

// recordTag encodes (scope, key) as the content of a hash tag. '%', ':',
// '{', '}' and bytes outside printable ASCII are percent-encoded in each
// part and the parts are joined by ':', so two different pairs never give
// the same tag and the tag never contains a brace (which would end it).
func recordTag(scope, key string) string {
	var b strings.Builder
	b.Grow(len(scope) + len(key) + 8)
	escapeTagPart(&b, scope)
	b.WriteByte(':')
	escapeTagPart(&b, key)
	return b.String()
}

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
