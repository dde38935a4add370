package idemhttp

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

func TestParseKeyHeader(t *testing.T) {
	t.Parallel()
	good := map[string]idem.Key{
		`"abc"`:                              "abc",
		`abc`:                                "abc",
		` "abc" `:                            "abc",
		"\tabc\t":                            "abc",
		`"a b"`:                              "a b",
		`"a\"b"`:                             `a"b`,
		`"a\\b"`:                             `a\b`,
		`"a,b;c"`:                            "a,b;c",
		`8e03978e-40d5-43e8`:                 "8e03978e-40d5-43e8",
		`:x/y=`:                              ":x/y=",
		`"` + strings.Repeat("k", 255) + `"`: idem.Key(strings.Repeat("k", 255)),
	}
	for in, want := range good {
		got, err := ParseKeyHeader(in)
		if err != nil || got != want {
			t.Errorf("ParseKeyHeader(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{"", "  ", `""`, `"abc`, `"abc"x`, `"a\nb"`, `"a\x01b"`, "\"a\x80\"", `"a\b"`,
		`a b`, `a,b`, `a;b`, `a"b`, `a\b`, "a\x7f", `"abc";p=1`, strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 256) + `"`}
	for _, in := range bad {
		if k, err := ParseKeyHeader(in); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("ParseKeyHeader(%q) = %q, %v; want ErrInvalidKey", in, k, err)
		}
	}
}

func TestKeyFromHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	if _, err := KeyFromHeader(h); !errors.Is(err, ErrNoKey) {
		t.Fatalf("absent header: %v", err)
	}
	h.Add(HeaderName, `"a"`)
	if k, err := KeyFromHeader(h); err != nil || k != "a" {
		t.Fatalf("one header: %q, %v", k, err)
	}
	h.Add(HeaderName, `"b"`)
	if _, err := KeyFromHeader(h); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("repeated header: %v", err)
	}
}

func TestFormatKeyHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	for _, k := range []idem.Key{"abc", `a"b`, `a\b`, "a b,c;d"} {
		got, err := ParseKeyHeader(FormatKeyHeader(k))
		if err != nil || got != k {
			t.Errorf("round trip of %q: %q, %v", k, got, err)
		}
	}
}

func FuzzParseKeyHeader(f *testing.F) {
	for _, s := range []string{`"abc"`, `abc`, `"a\"b"`, `""`, `"`, `\`, `a b`, "\"\x00\"", `"a";b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := ParseKeyHeader(v)
		if err != nil {
			if !errors.Is(err, idem.ErrInvalidKey) {
				t.Fatalf("ParseKeyHeader(%q): error %v does not match ErrInvalidKey", v, err)
			}
			return
		}
		if verr := idem.ValidateKey(string(k)); verr != nil {
			t.Fatalf("ParseKeyHeader(%q) accepted invalid key %q: %v", v, k, verr)
		}
		// The canonical (quoted) form parses back to the same key.
		if k2, err := ParseKeyHeader(FormatKeyHeader(k)); err != nil || k2 != k {
			t.Fatalf("round trip of %q: %q, %v", k, k2, err)
		}
	})
}

func TestIsJSONContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                    true,
		"Application/JSON":                    true,
		"application/json; charset=utf-8":     true,
		" application/json ;charset=UTF-8":    true,
		"application/problem+json":            true,
		"application/vnd.api+json; ext=bulk":  true,
		"APPLICATION/MERGE-PATCH+JSON":        true,
		"application/ld+json;profile=\"x;y\"": true,
		"":                                    false,
		"text/json":                           false,
		"text/plain":                          false,
		"application/json5":                   false,
		"application/jsonx":                   false,
		"application/+json":                   false,
		"application/x json+json":             false,
		"application/a/b+json":                false,
		"application/json-seq":                false,
		"application/x-www-form-urlencoded":   false,
		"multipart/form-data; boundary=json":  false,
		"application":                         false,
		"json":                                false,
	} {
		if got := IsJSONContentType(ct); got != want {
			t.Errorf("IsJSONContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}
