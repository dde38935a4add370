package pgstore

import (
	"strings"
	"testing"
)

// FuzzAttemptRoundTrip: every attempt id reads back as written, and only
// the engine's form (32 lower-case hex digits) is packed into 16 bytes.
func FuzzAttemptRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789ABCDEF",
		"0123456789abcdef0123456789abcdeg", strings.Repeat("a", 31), strings.Repeat("a", 33), "operator:o'brien ✓", "\x01\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		enc := encodeAttempt(id)
		got, ok := decodeAttempt(enc)
		if !ok || got != id {
			t.Fatalf("decodeAttempt(encodeAttempt(%q)) = %q, %v", id, got, ok)
		}
		packed := len(id) == 32 && strings.Trim(id, "0123456789abcdef") == ""
		if packed != (len(enc) == 17 && enc[0] == attemptHex) {
			t.Fatalf("encodeAttempt(%q) = %x: packed %v, want %v", id, enc, !packed, packed)
		}
	})
}

func TestDecodeAttemptRefusesMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {attemptHex}, append([]byte{attemptHex}, make([]byte, 15)...), {3, 'a'}, {0}} {
		if id, ok := decodeAttempt(b); ok {
			t.Errorf("decodeAttempt(%x) = %q, true", b, id)
		}
	}
}

// A state code reaches stateByte as a byte (pgx) or a one-byte string
// (database/sql); a state name is refused.
func TestStateByteScan(t *testing.T) {
	var b stateByte
	if err := b.Scan("s"); err != nil || b != 's' {
		t.Errorf("Scan(\"s\") = %q, %v", byte(b), err)
	}
	if err := b.Scan([]byte("u")); err != nil || b != 'u' {
		t.Errorf("Scan([]byte(\"u\")) = %q, %v", byte(b), err)
	}
	if err := b.Scan("succeeded"); err == nil {
		t.Error("Scan accepted a state name for a code")
	}
}
