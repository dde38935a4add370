package idemhttp

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

func TestDigestsRoundTrip(t *testing.T) {
	d := map[string]string{"amount": "0123456789abcdef", "a b": "1", "a&b=c": "2", "é;": "3", "+%": "4", "": "5"}
	got := map[string]string{}
	decodeDigests(got, encodeDigests(d))
	if !maps.Equal(got, d) {
		t.Fatalf("round trip: %v, want %v", got, d)
	}
}

// testMiddleware is a Middleware with only what the digests need.
func testMiddleware(secret string) *Middleware {
	s := []byte(secret)
	return &Middleware{digestSecret: s, digestKeyID: digestKeyID(s), macs: newDigestMACs(s)}
}

// storedIntent is the record a first request with body made in scope.
func storedIntent(t *testing.T, m *Middleware, scope string, body []byte) *idem.Record {
	t.Helper()
	_, digests, object, err := fingerprintJSON("POST", "/c", body)
	if err != nil {
		t.Fatal(err)
	}
	in := &input{body: body, object: object, digested: true, digests: digests}
	intent, err := json.Marshal(idem.Intent{Operation: "POST", Fields: m.intentFields(scope, in)})
	if err != nil {
		t.Fatal(err)
	}
	return &idem.Record{Scope: scope, Intent: intent}
}

func retryInput(t *testing.T, body []byte) *input {
	t.Helper()
	_, digests, object, err := fingerprintJSON("POST", "/c", body)
	if err != nil {
		t.Fatal(err)
	}
	return &input{body: body, object: object, digested: true, digests: digests}
}

// A mismatch names the changed fields from the digests the record holds.
func TestMismatchFieldsFromStoredDigests(t *testing.T) {
	m := testMiddleware("0123456789abcdef0123456789abcdef")
	rec := storedIntent(t, m, "user-1", []byte(`{"amount":5000,"to":"DE00","note":"x"}`))
	in := retryInput(t, []byte(`{"amount":5000,"to":"DE01","note":"x"}`))
	if got := m.mismatchFields("user-1", rec, in); len(got) != 1 || got[0] != "to" {
		t.Errorf("fields %v, want [to]", got)
	}
	// Digests keyed with another secret (another process's) are not
	// compared: every field would seem to differ.
	other := testMiddleware("another secret, another process!")
	if got := other.mismatchFields("user-1", rec, in); got != nil {
		t.Errorf("fields %v from digests keyed with another secret, want none", got)
	}
	// A record made before digests were keyed is not compared either.
	legacy, _ := json.Marshal(idem.Intent{Operation: "POST", Fields: map[string]string{digestsField: in.digests}})
	if got := m.mismatchFields("user-1", &idem.Record{Intent: legacy}, in); got != nil {
		t.Errorf("fields %v from unkeyed digests, want none", got)
	}
}

// The digests a record keeps are keyed per scope: the same body in two
// scopes has no digest in common, and none equals the unkeyed digest.
func TestFieldDigestsDifferAcrossScopes(t *testing.T) {
	m := testMiddleware("0123456789abcdef0123456789abcdef")
	body := []byte(`{"amount":5000,"currency":"EUR","to":"DE00","note":"x","n":null,"same":"x"}`)
	in := retryInput(t, body)
	plain := map[string]string{}
	decodeDigests(plain, in.digests)
	seen := map[string]string{}
	for name, v := range plain {
		seen[v] = "unkeyed " + name
	}
	for _, scope := range []string{"alice", "bob", "alice "} {
		f := m.intentFields(scope, in)
		id, enc, _ := strings.Cut(f[keyedDigestsField], ":")
		if id != m.digestKeyID {
			t.Fatalf("scope %q: digests keyed with %q, want %q", scope, id, m.digestKeyID)
		}
		d := map[string]string{}
		decodeDigests(d, enc)
		if len(d) != len(plain) {
			t.Fatalf("scope %q: %d digests, want %d", scope, len(d), len(plain))
		}
		for name, v := range d {
			if prev, ok := seen[v]; ok {
				t.Errorf("scope %q field %q has the digest of %s", scope, name, prev)
			}
			seen[v] = "scope " + scope + " field " + name
		}
	}
	if f := m.intentFields("", in); f != nil {
		t.Errorf("the global scope keeps digests %v, want none", f)
	}
}

// memberDigest is XXH64 (seed 0) of the canonical value, big-endian, in
// hex: what records hold, so it must never change. The vectors are the
// algorithm's published ones.
func TestMemberDigestIsStable(t *testing.T) {
	for value, want := range map[string]string{
		``:  "ef46db3751d8e999",
		`a`: "d24ec4f1a98c6e5b",
	} {
		if got := string(memberDigest(nil, []byte(value))); got != want {
			t.Errorf("memberDigest(%q) = %s, want %s", value, got, want)
		}
	}
}

// fingerprintJSON must agree with the root package's fingerprint and
// refusals, and its digests must be memberDigest of each member's
// canonical value under the member's unescaped name, as a decoder that
// shares none of its code reads them.
func FuzzFingerprintJSON(f *testing.F) {
	for _, s := range []string{
		`{"amount":5000,"currency":"EUR","to":{"iban":"DE00","tags":["a","b,c}"]}}`,
		` { "b" : [1, 2.50, 1e3], "a" : null, "c" : "x\"}" } `, `{}`, `[]`, `"s"`, `17`, `{"a\nb":1,"c d":2}`,
		`{"é":"\u00e9","&=":true,"+%":false}`, `{"a":1,"a":2}`, `{"a":}`, `{"a":{"b":{}},"z":[[]]}`,
		`{"\u0061\"\n":1,"\\":{"\"":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fp, digests, object, err := fingerprintJSON("POST", "/c?x=1", body)
		wantFP, wantErr := idem.FingerprintRequest("POST", "/c?x=1", body, true)
		if (err == nil) != (wantErr == nil) || fp != wantFP {
			t.Fatalf("fingerprint %x, %v; idem.FingerprintRequest %x, %v", fp, err, wantFP, wantErr)
		}
		if err != nil {
			return
		}
		_, werr := idem.TopLevelDigests(body)
		if object != (werr == nil) {
			t.Fatalf("object = %v, TopLevelDigests error %v", object, werr)
		}
		if !object {
			return
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("body accepted by the canonicaliser, refused by encoding/json: %v", err)
		}
		want := map[string]string{}
		for name, raw := range members {
			canon, err := idem.AppendCanonicalJSON(nil, raw)
			if err != nil {
				t.Fatalf("member %q: %v", name, err)
			}
			want[name] = string(memberDigest(nil, canon))
		}
		got := map[string]string{}
		decodeDigests(got, digests)
		if !maps.Equal(got, want) {
			t.Fatalf("digests %v, want %v", got, want)
		}
	})
}

func TestReadBodyBounds(t *testing.T) {
	for _, c := range []struct {
		body        string
		hint, limit int64
		want        int
	}{
		{"hello", 5, 10, 5},
		{"hello", -1, 10, 5},
		{"hello world", 5, 8, 9}, // longer than declared: read to limit+1
		{strings.Repeat("x", 2000), -1, 1500, 1501},
		{"", 0, 10, 0},
	} {
		b, err := readBody(strings.NewReader(c.body), c.hint, c.limit)
		if err != nil || len(b) != c.want || string(b) != c.body[:c.want] {
			t.Errorf("readBody(%d bytes, hint %d, limit %d) = %d bytes, %v; want %d", len(c.body), c.hint, c.limit, len(b), err, c.want)
		}
	}
}

// TestCallBodyActsAsBytesReader holds the handler's body reader to
// bytes.Reader's behaviour: reads in pieces, WriteTo of the rest, EOF.
func TestCallBodyActsAsBytesReader(t *testing.T) {
	body := []byte(`{"amount":5000,"currency":"EUR"}`)
	for _, first := range []int{0, 1, 7, len(body), len(body) + 5} {
		c := &call{in: input{body: body}}
		got, want := (*callBody)(c), bytes.NewReader(body)
		p, q := make([]byte, first), make([]byte, first)
		n1, err1 := got.Read(p)
		n2, err2 := want.Read(q)
		if n1 != n2 || err1 != err2 || !bytes.Equal(p[:n1], q[:n2]) {
			t.Fatalf("Read(%d) = %d, %v; bytes.Reader %d, %v", first, n1, err1, n2, err2)
		}
		var bg, bw bytes.Buffer
		m1, err1 := got.WriteTo(&bg)
		m2, err2 := want.WriteTo(&bw)
		if m1 != m2 || err1 != err2 || !bytes.Equal(bg.Bytes(), bw.Bytes()) {
			t.Fatalf("WriteTo after %d = %d, %v; bytes.Reader %d, %v", first, m1, err1, m2, err2)
		}
		n1, err1 = got.Read(p[:cap(p)])
		n2, err2 = want.Read(q[:cap(q)])
		if n1 != n2 || err1 != err2 {
			t.Fatalf("Read at the end = %d, %v; bytes.Reader %d, %v", n1, err1, n2, err2)
		}
		if m, err := got.WriteTo(&bg); m != 0 || err != nil {
			t.Fatalf("WriteTo at the end = %d, %v", m, err)
		}
	}
}
