package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func fingerprintOnly(method, route string, body []byte, isJSON bool) (Fingerprint, error) {
	fp, _, err := FingerprintBody(method, route, body, isJSON)
	return fp, err
}

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
		{"FingerprintBody json", func() (Fingerprint, error) {
			return fingerprintOnly("POST", "/v1/charges", []byte(`{"b":1,"a":[1.0,"x"]}`), true)
		}, "232f982fc74d3a6c8bc5b808505c5c02dc1f09954bbe1d32d69a29caad6aeaa0"},
		{"FingerprintBody raw", func() (Fingerprint, error) {
			return fingerprintOnly("POST", "/v1/charges", []byte("amount=5"), false)
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

func TestFingerprintBody(t *testing.T) {
	body := []byte(`{"amount":50,"currency":"EUR"}`)
	must := func(method, route string, body []byte, isJSON bool) Fingerprint {
		t.Helper()
		f, err := fingerprintOnly(method, route, body, isJSON)
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
		if _, _, err := FingerprintBody("POST", "/x", []byte(bad), true); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("FingerprintBody(%q, json): err = %v, want ErrInvalidJSON", bad, err)
		}
		if _, d, err := FingerprintBody("POST", "/x", []byte(bad), false); err != nil || d != "" {
			t.Errorf("FingerprintBody(%q, raw) = %q, %v; want no digests, no error", bad, d, err)
		}
	}
}

func digestsOf(t *testing.T, body string) Digests {
	t.Helper()
	_, d, err := FingerprintBody("POST", "/x", []byte(body), true)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The one encoding: name=digest entries in canonical order, names escaped
// as url.QueryEscape does, each digest XXH64 (seed 0) of the member's
// canonical value as 16 hex digits.
func TestDigestsEncoding(t *testing.T) {
	d := digestsOf(t, `{"b":{"y":1,"x":2.0},"a b":"v","*":[1]}`)
	want := "%2A=" + xxh(`[1]`) + "&a+b=" + xxh(`"v"`) + "&b=" + xxh(`{"x":2,"y":1}`)
	if string(d) != want {
		t.Errorf("digests = %q\nwant      %q", d, want)
	}
	if d.Len() != 3 {
		t.Errorf("Len = %d, want 3", d.Len())
	}
	if got := digestsOf(t, `{"\u0061\"\n":1,"é":2,"":3}`); got.Len() != 3 || !strings.Contains(string(got), "a%22%0A=") || !strings.Contains(string(got), "%C3%A9=") {
		t.Errorf("escaped names: %q", got)
	}
	for _, body := range []string{`{}`, ` {} `, `[]`, `[{"a":1}]`, `"x"`, `1`, `null`} {
		if got := digestsOf(t, body); got != "" || got.Len() != 0 {
			t.Errorf("digests of %s = %q, want none", body, got)
		}
	}
	if got := DigestsOf(map[string][]byte{"b": []byte("2"), "a b": []byte(`"v"`)}, 0); string(got) != "a+b="+xxh(`"v"`)+"&b="+xxh("2") {
		t.Errorf("DigestsOf = %q", got)
	}
}

func xxh(s string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], xxhash.Sum64String(s))
	return hex.EncodeToString(b[:])
}

func TestDigestsDiff(t *testing.T) {
	a := digestsOf(t, `{"amount":5000,"currency":"EUR","meta":{"b":1,"a":2},"note":"hi"}`)
	same := digestsOf(t, ` { "note" : "h\u0069", "meta":{"a":2,"b":1.0}, "currency":"EUR", "amount":5e3 } `)
	if a != same {
		t.Errorf("digests differ for equal bodies:\n%s\n%s", a, same)
	}
	other := digestsOf(t, `{"amount":5001,"currency":"EUR","meta":{"b":1,"a":3},"extra":null}`)
	if got, want := a.Diff(other), []string{"amount", "extra", "meta", "note"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if got := a.Diff(same); got != nil {
		t.Errorf("Diff of equal bodies = %q, want nil", got)
	}
	if got, want := Digests("").Diff(digestsOf(t, `{"x y":1}`)), []string{"x y"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Diff from none = %q, want %q", got, want)
	}
	// A member named "*" is not the rest entry.
	star := digestsOf(t, `{"*":1}`)
	if got, want := star.Diff(digestsOf(t, `{"*":2}`)), []string{"*"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Diff of a member named *: %q, want %q", got, want)
	}
}

// bigObject returns a JSON object of n tiny members, "m000000":0 and on,
// with member i's value set to v.
func bigObject(n, i, v int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for j := range n {
		if j > 0 {
			b.WriteByte(',')
		}
		val := 0
		if j == i {
			val = v
		}
		fmt.Fprintf(&b, `"m%06d":%d`, j, val)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// A 1 MiB body of ~111k tiny members keeps a short digest list: the first
// MaxDigests members have entries, the rest share one; a change among the
// first is still named, one among the rest is named RestMembers.
func TestDigestsBound(t *testing.T) {
	const n = 111_000
	body := bigObject(n, -1, 0)
	if len(body) < 1<<20 {
		t.Fatalf("body of %d bytes, want at least 1 MiB", len(body))
	}
	fp, d, err := FingerprintBody("POST", "/x", body, true)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != DefaultMaxDigests+1 || len(d) > 4<<10 {
		t.Fatalf("digests of %d members: %d entries, %d bytes; want %d entries, at most 4 KiB", n, d.Len(), len(d), DefaultMaxDigests+1)
	}
	early := bigObject(n, 10, 7)
	_, de, _ := FingerprintBody("POST", "/x", early, true)
	if got, want := d.Diff(de), []string{"m000010"}; !reflect.DeepEqual(got, want) {
		t.Errorf("change in member 10: Diff = %q, want %q", got, want)
	}
	late := bigObject(n, n-1, 7)
	fpl, dl, _ := FingerprintBody("POST", "/x", late, true)
	if got, want := d.Diff(dl), []string{RestMembers}; !reflect.DeepEqual(got, want) {
		t.Errorf("change in the last member: Diff = %q, want %q", got, want)
	}
	if fpl == fp {
		t.Error("a change past the digest bound kept the fingerprint")
	}
	// The bound is configurable; negative gives every member to the rest.
	_, d3, _ := BodyHasher{MaxDigests: 3}.Hash("POST", "/x", early, true)
	if d3.Len() != 4 {
		t.Errorf("MaxDigests 3: %d entries, want 4", d3.Len())
	}
	_, dn, _ := BodyHasher{MaxDigests: -1}.Hash("POST", "/x", []byte(`{"a":1,"b":2}`), true)
	if !strings.HasPrefix(string(dn), "*=") || dn.Len() != 1 {
		t.Errorf("MaxDigests -1: %q, want only the rest entry", dn)
	}
	// Long names cannot grow the list past the byte bound either.
	var long strings.Builder
	long.WriteByte('{')
	for j := range 8 {
		if j > 0 {
			long.WriteByte(',')
		}
		fmt.Fprintf(&long, `"%s%d":1`, strings.Repeat("é", 2000), j)
	}
	long.WriteByte('}')
	_, dl2, err := FingerprintBody("POST", "/x", []byte(long.String()), true)
	if err != nil || len(dl2) > 4<<10+19 {
		t.Errorf("digests of long names: %d bytes, %v; want at most 4 KiB and the rest entry", len(dl2), err)
	}
	many := map[string][]byte{}
	for j := range 1000 {
		many[fmt.Sprintf("f%04d", j)] = []byte("x")
	}
	if got := DigestsOf(many, 0); got.Len() != DefaultMaxDigests+1 {
		t.Errorf("DigestsOf 1000 values: %d entries, want %d", got.Len(), DefaultMaxDigests+1)
	}
}
