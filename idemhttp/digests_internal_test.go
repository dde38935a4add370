package idemhttp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// testMiddleware is a Middleware with only what the digests need.
func testMiddleware(secret string) *Middleware {
	k, err := idem.NewDigestKey([]byte(secret))
	if err != nil {
		panic(err)
	}
	return &Middleware{digests: k}
}

// testInput is the input prepare makes of a JSON body.
func testInput(t *testing.T, body []byte) *input {
	t.Helper()
	_, d, err := idem.FingerprintBody("POST", "/c", body, true)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(d)
	return &input{body: body, fields: len(d) > 0, digests: &b}
}

// storedIntent is the record a first request with body made in scope.
func storedIntent(t *testing.T, m *Middleware, scope string, body []byte) *idem.Record {
	t.Helper()
	intent, err := json.Marshal(idem.Intent{Operation: "POST", Fields: m.intentFields(scope, testInput(t, body))})
	if err != nil {
		t.Fatal(err)
	}
	return &idem.Record{Scope: scope, Intent: intent}
}

// A mismatch names the changed fields from the digests the record holds.
func TestMismatchFieldsFromStoredDigests(t *testing.T) {
	m := testMiddleware("0123456789abcdef0123456789abcdef")
	rec := storedIntent(t, m, "user-1", []byte(`{"amount":5000,"to":"DE00","note":"x"}`))
	in := testInput(t, []byte(`{"amount":5000,"to":"DE01","note":"x"}`))
	if got := m.mismatchFields("user-1", rec, in); len(got) != 1 || got[0] != "to" {
		t.Errorf("fields %v, want [to]", got)
	}
	// Digests keyed with another secret (another process's) are not
	// compared: every field would seem to differ.
	other := testMiddleware("another secret, another process!")
	if got := other.mismatchFields("user-1", rec, in); got != nil {
		t.Errorf("fields %v from digests keyed with another secret, want none", got)
	}
	// Unkeyed digests (as idemmcp once wrote them)
	// are never compared by the middleware.
	plain, _ := json.Marshal(idem.Intent{Operation: "POST", Fields: map[string]string{unkeyedDigestsField: string(*in.digests)}})
	if got := m.mismatchFields("user-1", &idem.Record{Intent: plain}, in); got != nil {
		t.Errorf("fields %v from unkeyed digests, want none", got)
	}
}

// entries splits encoded digests into name → digest.
func entries(enc string) map[string]string {
	d := map[string]string{}
	for _, pair := range strings.Split(enc, "&") {
		name, v, _ := strings.Cut(pair, "=")
		d[name] = v
	}
	return d
}

// The digests a record keeps are keyed per scope: the same body in two
// scopes has no digest in common, and none equals the unkeyed digest.
func TestFieldDigestsDifferAcrossScopes(t *testing.T) {
	m := testMiddleware("0123456789abcdef0123456789abcdef")
	body := []byte(`{"amount":5000,"currency":"EUR","to":"DE00","note":"x","n":null,"same":"x"}`)
	in := testInput(t, body)
	plain := entries(string(*in.digests))
	seen := map[string]string{}
	for name, v := range plain {
		seen[v] = "unkeyed " + name
	}
	for _, scope := range []string{"alice", "bob", "alice "} {
		f := m.intentFields(scope, in)
		id, enc, _ := strings.Cut(f[keyedDigestsField], ":")
		if id != m.digests.ID() {
			t.Fatalf("scope %q: digests keyed with %q, want %q", scope, id, m.digests.ID())
		}
		d := entries(enc)
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

// unkeyedDigestsField is where idemgrpc and idemmcp once stored unkeyed
// digests (the deprecated idem.DigestsField).
const unkeyedDigestsField = "idem.digests"
