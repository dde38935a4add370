package idem

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func fingerprintOf(parts ...string) Fingerprint {
	bs := make([][]byte, len(parts))
	for i, p := range parts {
		bs[i] = []byte(p)
	}
	return NewFingerprint(bs...)
}

// Stored fingerprints must stay comparable across releases: these values
// were computed independently of this code and pin the framing (8-byte
// big-endian length before each part) and the domain tags.
func TestFingerprintGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  func() (Fingerprint, error)
		want string
	}{
		{"NewFingerprint", func() (Fingerprint, error) { return fingerprintOf("POST", "/x"), nil },
			"01b7590a951edd87cf03ed0fbdd9decc81bab2da1daa392b9c7e4d5ca2da1991"},
		{"FingerprintRequest json", func() (Fingerprint, error) {
			return FingerprintRequest("POST", "/v1/charges", []byte(`{"b":1,"a":[1.0,"x"]}`), true)
		}, "232f982fc74d3a6c8bc5b808505c5c02dc1f09954bbe1d32d69a29caad6aeaa0"},
		{"FingerprintRequest raw", func() (Fingerprint, error) {
			return FingerprintRequest("POST", "/v1/charges", []byte("amount=5"), false)
		}, "c4593f4ee3425096786b80ea70a5438731ebc5201fafa3a6cf8e8ac113e51994"},
	} {
		got, err := tc.got()
		if err != nil || got.String() != tc.want {
			t.Errorf("%s = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

func TestNewFingerprintFraming(t *testing.T) {
	// sha256 of 00..01 'a': one part, its length first.
	want := sha256.Sum256([]byte("\x00\x00\x00\x00\x00\x00\x00\x01a"))
	if got := fingerprintOf("a"); got != Fingerprint(want) {
		t.Errorf("fingerprintOf(a) = %s, want %x", got, want)
	}
	// Length prefixes keep the part boundaries: none of these collide.
	lists := [][]string{
		{"ab", "c"}, {"a", "bc"}, {"abc"}, {"a", "b", "c"},
		{"a", ""}, {"", "a"}, {"a"}, {""}, {"", ""}, {},
		{"\x00\x00\x00\x00\x00\x00\x00\x01a"},
	}
	seen := make(map[Fingerprint][]string)
	for _, l := range lists {
		f := fingerprintOf(l...)
		if prev, ok := seen[f]; ok {
			t.Errorf("%q and %q share fingerprint %s", prev, l, f)
		}
		seen[f] = l
	}
}

func TestFingerprintStringParse(t *testing.T) {
	f := fingerprintOf("round", "trip")
	s := f.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 64 lower-case hex digits", s)
	}
	back, err := ParseFingerprint(s)
	if err != nil || back != f {
		t.Fatalf("ParseFingerprint(String()) = %s, %v; want %s", back, err, f)
	}
	if f.IsZero() || !(Fingerprint{}).IsZero() {
		t.Error("IsZero is wrong")
	}
	for _, bad := range []string{"", s[:63], s + "0", strings.Repeat("g", 64), s[:62] + "x1", " " + s[1:]} {
		if _, err := ParseFingerprint(bad); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted", bad)
		}
	}
}

func TestFingerprintRequest(t *testing.T) {
	body := []byte(`{"amount":50,"currency":"EUR"}`)
	must := func(method, route string, body []byte, isJSON bool) Fingerprint {
		t.Helper()
		f, err := FingerprintRequest(method, route, body, isJSON)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := must("POST", "/charges", body, true)
	if f := must("POST", "/charges", []byte(" {\"currency\" : \"EUR\", \"amount\" : 5e1}\n"), true); f != base {
		t.Error("reordered, re-spaced JSON body changed the fingerprint")
	}
	for name, f := range map[string]Fingerprint{
		"other amount":      must("POST", "/charges", []byte(`{"amount":51,"currency":"EUR"}`), true),
		"other method":      must("PUT", "/charges", body, true),
		"other route":       must("POST", "/refunds", body, true),
		"same bytes as raw": must("POST", "/charges", body, false),
		"untagged":          NewFingerprint([]byte("POST"), []byte("/charges"), body),
	} {
		if f == base {
			t.Errorf("%s: fingerprint did not change", name)
		}
	}
	// The route/body boundary is kept.
	if must("POST", "/charges", body, false) == must("POST", "/charges{", body[1:], false) {
		t.Error("moving a byte from the body to the route kept the fingerprint")
	}
	// Raw bodies are hashed as bytes: whitespace matters.
	if must("POST", "/x", []byte("a b"), false) == must("POST", "/x", []byte("a  b"), false) {
		t.Error("raw bodies with different bytes share a fingerprint")
	}
	// A canonical body hashed raw must not meet the same request's JSON hash.
	canon, _ := CanonicalJSON(body)
	if must("POST", "/charges", canon, false) == base {
		t.Error("JSON and raw domains collide")
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `{"a":}`, "\"\xff\""} {
		if _, err := FingerprintRequest("POST", "/x", []byte(bad), true); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("FingerprintRequest(%q, json): err = %v, want ErrInvalidJSON", bad, err)
		}
		if _, err := FingerprintRequest("POST", "/x", []byte(bad), false); err != nil {
			t.Errorf("FingerprintRequest(%q, raw): %v", bad, err)
		}
	}
}
