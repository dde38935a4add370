package idem

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key accepted, in bytes.
const MaxKeyLen = 255

// Key is an intent's stable identity: 1..255 bytes of printable ASCII
// (0x20..0x7E). It is owned by the client or the initiating event, never by
// a retrying layer.
type Key string

// ParseKey validates s as a key. It never truncates or hashes an invalid key
// into acceptance; the error is a [*KeyError] that matches [ErrInvalidKey].
func ParseKey(s string) (Key, error) {
	if err := ValidateKey(s); err != nil {
		return "", err
	}
	return Key(s), nil
}

// ValidateKey reports why s is not a valid key, or nil.
func ValidateKey(s string) error {
	if s == "" {
		return &KeyError{Reason: "empty"}
	}
	if len(s) > MaxKeyLen {
		return &KeyError{Key: truncate(s), Reason: "longer than " + strconv.Itoa(MaxKeyLen) + " bytes"}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return &KeyError{Key: truncate(s), Reason: fmt.Sprintf("byte %d (0x%02X) is not printable ASCII", i, c)}
		}
	}
	return nil
}

func (k Key) String() string { return string(k) }

// MaxScopeLen is the longest scope accepted, in bytes: every store keeps a
// scope of this length whole (the MySQL store's column is VARBINARY(255)).
const MaxScopeLen = 255

// ValidateScope reports why s is not a valid scope, or nil. The empty
// scope is valid (one global namespace). A scope is at most [MaxScopeLen]
// bytes of UTF-8 without control characters: a tenant or principal
// identifier, or a digest of one. The engine refuses other scopes before
// any store sees them, so that no store can truncate two scopes into one
// or fail on bytes it cannot keep.
func ValidateScope(s string) error {
	if len(s) > MaxScopeLen {
		return &ScopeError{Reason: "longer than " + strconv.Itoa(MaxScopeLen) + " bytes"}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return &ScopeError{Reason: fmt.Sprintf("byte %d is not valid UTF-8", i)}
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return &ScopeError{Reason: fmt.Sprintf("byte %d is a control character (%U)", i, r)}
		}
		i += n
	}
	return nil
}

// DeriveKey builds a versioned, namespaced key from an immutable upstream
// identity: DeriveKey("charge", 1, orderID, attemptID) gives
// "charge:v1:<orderID>:<attemptID>".
//
// Parts are escaped so that two different part lists never produce the same
// key: '%' becomes "%25" and ':' becomes "%3A", and a space or any byte
// outside printable ASCII is percent-encoded. The namespace must be non-empty and
// contain only letters, digits, '-', '_' and '.', the version must be
// positive, and no part may be empty. The result is validated as a [Key].
func DeriveKey(namespace string, version int, parts ...string) (Key, error) {
	if namespace == "" {
		return "", &KeyError{Reason: "derived key: empty namespace"}
	}
	for i := 0; i < len(namespace); i++ {
		c := namespace[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", &KeyError{Key: truncate(namespace), Reason: "derived key: namespace may hold only letters, digits, '-', '_' and '.'"}
		}
	}
	if version < 1 {
		return "", &KeyError{Reason: "derived key: version must be 1 or more"}
	}
	if len(parts) == 0 {
		return "", &KeyError{Reason: "derived key: no parts"}
	}
	var b strings.Builder
	b.WriteString(namespace)
	b.WriteString(":v")
	b.WriteString(strconv.Itoa(version))
	for i, p := range parts {
		if p == "" {
			return "", &KeyError{Reason: "derived key: part " + strconv.Itoa(i) + " is empty"}
		}
		b.WriteByte(':')
		escapePart(&b, p)
	}
	return ParseKey(b.String())
}

// MustDeriveKey is like [DeriveKey] but panics on error. Use it only with
// constant parts, as in tests and examples.
func MustDeriveKey(namespace string, version int, parts ...string) Key {
	k, err := DeriveKey(namespace, version, parts...)
	if err != nil {
		panic(err)
	}
	return k
}

const hexDigits = "0123456789ABCDEF"

func escapePart(b *strings.Builder, p string) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' || c == ':' || c < 0x21 || c > 0x7e {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// truncate shortens s for display in errors.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
