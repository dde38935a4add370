package natsstore

import (
	"regexp"
	"strings"
	"testing"
)

// kvKeyRe is the alphabet of a KV key that nats.go accepts.
var kvKeyRe = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func validKVKey(k string) bool {
	return kvKeyRe.MatchString(k) && k[0] != '.' && k[len(k)-1] != '.' && !strings.Contains(k, "..")
}

func TestEscapeExamples(t *testing.T) {
	for in, want := range map[string]string{
		"":            "=",
		"abc-_/XYZ09": "abc-_/XYZ09",
		"a.b":         "a=2Eb",
		"=":           "=3D",
		"*>":          "=2A=3E",
		"é":           "=C3=A9",
		" ":           "=20",
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "=2", "=2e", "=41", "a=", "=ZZ", "a.b", "=="} {
		if _, err := unescape(bad); err == nil {
			t.Errorf("unescape(%q) accepted a token escape cannot produce", bad)
		}
	}
}

// FuzzKeyEscape: every (scope, key) gives a valid KV key that parses back
// to the same pair, so two pairs never share a key (injective), and the
// scope filter matches exactly that scope's keys.
func FuzzKeyEscape(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"a", "b"}, {"a.b", "c"}, {"a", "b.c"}, {"=", "=3D"}, {"x y", "*>"}, {"tenant/1", "charge:v1:42"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, scope, key string) {
		k := recordKey(scope, key)
		if !validKVKey(k) {
			t.Fatalf("recordKey(%q, %q) = %q: not a valid KV key", scope, key, k)
		}
		s2, k2, err := parseRecordKey(k)
		if err != nil || s2 != scope || k2 != key {
			t.Fatalf("parseRecordKey(%q) = %q, %q, %v; want %q, %q", k, s2, k2, err, scope, key)
		}
		tok, err := unescape(escape(scope))
		if err != nil || tok != scope {
			t.Fatalf("unescape(escape(%q)) = %q, %v", scope, tok, err)
		}
		if scope != "" {
			pre := strings.TrimSuffix(scopeFilter(scope), "*")
			if !strings.HasPrefix(k, pre) || strings.Contains(k[len(pre):], ".") {
				t.Fatalf("scopeFilter(%q) = %q does not match %q", scope, scopeFilter(scope), k)
			}
		}
	})
}
