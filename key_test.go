package idem

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"simple", "abc", true},
		{"one byte", "a", true},
		{"all printable ASCII", printableASCII(), true},
		{"space inside", "a b", true},
		{"tilde", "~", true},
		{"max length", strings.Repeat("k", MaxKeyLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("k", MaxKeyLen+1), false},
		{"far too long", strings.Repeat("k", 10_000), false},
		{"NUL", "a\x00b", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"unit separator", "\x1f", false},
		{"DEL", "a\x7f", false},
		{"non-ASCII", "café", false},
		{"invalid UTF-8", "a\xff", false},
		{"high byte at max length", strings.Repeat("k", MaxKeyLen-1) + "\x80", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if tc.ok {
				if err != nil || string(k) != tc.in || k.String() != tc.in {
					t.Fatalf("ParseKey(%q) = %q, %v", tc.in, k, err)
				}
				if ValidateKey(tc.in) != nil {
					t.Fatalf("ValidateKey(%q) refused", tc.in)
				}
				return
			}
			if err == nil || k != "" {
				t.Fatalf("ParseKey(%q) = %q, %v; want an error", tc.in, k, err)
			}
			if !errors.Is(err, ErrInvalidKey) || !errors.Is(ValidateKey(tc.in), ErrInvalidKey) {
				t.Errorf("error %v does not match ErrInvalidKey", err)
			}
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %T is not a *KeyError", err)
			}
			if len(ke.Key) > 64 {
				t.Errorf("KeyError.Key is %d bytes, want at most 64", len(ke.Key))
			}
		})
	}
}

func printableASCII() string {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

func TestDeriveKey(t *testing.T) {
	for _, tc := range []struct {
		ns    string
		v     int
		parts []string
		want  string
	}{
		{"charge", 1, []string{"order-123", "1"}, "charge:v1:order-123:1"},
		{"refund", 1, []string{"order-123", "1"}, "refund:v1:order-123:1"},
		{"job.daily_Report-2", 12, []string{"2024-01-01"}, "job.daily_Report-2:v12:2024-01-01"},
		{"n", 1, []string{"a:b", "c"}, "n:v1:a%3Ab:c"},
		{"n", 1, []string{"a", "b:c"}, "n:v1:a:b%3Ac"},
		{"n", 1, []string{"a%3Ab"}, "n:v1:a%253Ab"},
		{"n", 1, []string{"a:b"}, "n:v1:a%3Ab"},
		{"n", 1, []string{"a b\t\x00"}, "n:v1:a%20b%09%00"},
		{"n", 1, []string{"é\x7f"}, "n:v1:%C3%A9%7F"},
		{"n", 1, []string{"~!\"#$&'()*+,-./;<=>?@[\\]^_`{|}"}, "n:v1:~!\"#$&'()*+,-./;<=>?@[\\]^_`{|}"},
	} {
		k, err := DeriveKey(tc.ns, tc.v, tc.parts...)
		if err != nil || string(k) != tc.want {
			t.Errorf("DeriveKey(%q, %d, %q) = %q, %v; want %q", tc.ns, tc.v, tc.parts, k, err, tc.want)
		}
	}
}

// Part lists that a naive join would confuse must give different keys.
func TestDeriveKeyEscapingSeparates(t *testing.T) {
	lists := [][]string{
		{"a:b", "c"}, {"a", "b:c"}, {"a", "b", "c"}, {"a:b:c"},
		{"a%3Ab"}, {"a:b"}, {"a%253Ab"}, {"a%"}, {"a%25"},
		{"a b"}, {"a%20b"}, {"é"}, {"%C3%A9"},
	}
	seen := make(map[Key][]string)
	for _, l := range lists {
		k := MustDeriveKey("ns", 1, l...)
		if prev, ok := seen[k]; ok {
			t.Errorf("%q and %q both derive %q", prev, l, k)
		}
		seen[k] = l
	}
	// Namespace and version take part in the key too.
	if MustDeriveKey("charge", 1, "x") == MustDeriveKey("refund", 1, "x") ||
		MustDeriveKey("charge", 1, "x") == MustDeriveKey("charge", 2, "x") ||
		MustDeriveKey("charge", 1, "1", "x") == MustDeriveKey("charge", 11, "x") {
		t.Error("namespace or version does not separate keys")
	}
}

func TestDeriveKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ns    string
		v     int
		parts []string
	}{
		{"empty namespace", "", 1, []string{"a"}},
		{"colon in namespace", "a:b", 1, []string{"c"}},
		{"space in namespace", "a b", 1, []string{"c"}},
		{"percent in namespace", "a%", 1, []string{"c"}},
		{"non-ASCII namespace", "é", 1, []string{"c"}},
		{"version zero", "ns", 0, []string{"a"}},
		{"negative version", "ns", -1, []string{"a"}},
		{"no parts", "ns", 1, nil},
		{"empty part", "ns", 1, []string{"a", ""}},
		{"too long", "ns", 1, []string{strings.Repeat("x", MaxKeyLen)}},
		{"too long after escaping", "ns", 1, []string{strings.Repeat(":", 84)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := DeriveKey(tc.ns, tc.v, tc.parts...)
			if err == nil || k != "" {
				t.Fatalf("DeriveKey = %q, %v; want an error", k, err)
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("error %v does not match ErrInvalidKey", err)
			}
		})
	}
	// The longest part that still fits is accepted: the limit is the key's.
	if _, err := DeriveKey("ns", 1, strings.Repeat("x", MaxKeyLen-len("ns:v1:"))); err != nil {
		t.Errorf("key of exactly %d bytes refused: %v", MaxKeyLen, err)
	}
}

func TestMustDeriveKeyPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustDeriveKey with an empty part did not panic")
		}
	}()
	MustDeriveKey("ns", 1, "")
}

// FuzzParseKey: never panics; what it accepts is 1..255 bytes of printable
// ASCII, and what it refuses is refused with ErrInvalidKey.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", "", "a\x7f", "café", strings.Repeat("k", MaxKeyLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		printable := len(s) >= 1 && len(s) <= MaxKeyLen && strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) < 0
		if err != nil {
			if printable || !errors.Is(err, ErrInvalidKey) || k != "" {
				t.Fatalf("ParseKey(%q) = %q, %v", s, k, err)
			}
			return
		}
		if !printable || string(k) != s {
			t.Fatalf("ParseKey(%q) accepted %q", s, k)
		}
	})
}

// FuzzDeriveKey proves injectivity: every derived key is decoded back into
// exactly the namespace, version and parts it came from, so two different
// part lists can never share a key.
func FuzzDeriveKey(f *testing.F) {
	f.Add("charge", 1, "a:b", "c", "charge", 1, "a", "b:c")
	f.Add("n", 1, "a%3Ab", "", "n", 1, "a:b", "")
	f.Add("n", 12, "é", "%", "n", 1, "2", "é")
	f.Fuzz(func(t *testing.T, ns1 string, v1 int, a1, b1, ns2 string, v2 int, a2, b2 string) {
		l1, l2 := partList(a1, b1), partList(a2, b2)
		k1, err1 := DeriveKey(ns1, v1, l1...)
		k2, err2 := DeriveKey(ns2, v2, l2...)
		for _, d := range []struct {
			k     Key
			err   error
			ns    string
			v     int
			parts []string
		}{{k1, err1, ns1, v1, l1}, {k2, err2, ns2, v2, l2}} {
			if d.err != nil {
				if !errors.Is(d.err, ErrInvalidKey) {
					t.Fatalf("DeriveKey error %v does not match ErrInvalidKey", d.err)
				}
				continue
			}
			if ValidateKey(string(d.k)) != nil {
				t.Fatalf("derived invalid key %q", d.k)
			}
			ns, v, parts, ok := undoDerive(string(d.k))
			if !ok || ns != d.ns || v != d.v || !slices.Equal(parts, d.parts) {
				t.Fatalf("key %q decodes to (%q, %d, %q), derived from (%q, %d, %q)", d.k, ns, v, parts, d.ns, d.v, d.parts)
			}
		}
		if err1 == nil && err2 == nil && k1 == k2 && (ns1 != ns2 || v1 != v2 || !slices.Equal(l1, l2)) {
			t.Fatalf("(%q, %d, %q) and (%q, %d, %q) both derive %q", ns1, v1, l1, ns2, v2, l2, k1)
		}
	})
}

// partList makes a one- or two-part list (an empty b means one part).
func partList(a, b string) []string {
	if b == "" {
		return []string{a}
	}
	return []string{a, b}
}

// undoDerive is DeriveKey's inverse, written from its documented format:
// namespace ":v" version, then ':'-separated percent-encoded parts.
func undoDerive(k string) (ns string, v int, parts []string, ok bool) {
	fields := strings.Split(k, ":")
	if len(fields) < 3 || !strings.HasPrefix(fields[1], "v") {
		return "", 0, nil, false
	}
	v, err := strconv.Atoi(fields[1][1:])
	if err != nil || strconv.Itoa(v) != fields[1][1:] {
		return "", 0, nil, false
	}
	for _, f := range fields[2:] {
		p, err := url.PathUnescape(f)
		if err != nil {
			return "", 0, nil, false
		}
		parts = append(parts, p)
	}
	return fields[0], v, parts, true
}

// FuzzValidateScope: an accepted scope fits every store whole — at most
// MaxScopeLen bytes of valid UTF-8 without a control character.
func FuzzValidateScope(f *testing.F) {
	for _, s := range []string{"", "tenant-42", "Zürich", "nul\x00", "\xff", "\u0085", strings.Repeat("s", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateScope(s)
		ok := len(s) <= MaxScopeLen && utf8.ValidString(s)
		for _, r := range s {
			if unicode.IsControl(r) {
				ok = false
			}
		}
		if (err == nil) != ok {
			t.Fatalf("ValidateScope(%q) = %v, want ok=%v", s, err, ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidScope) {
			t.Fatalf("error %v is not ErrInvalidScope", err)
		}
	})
}
