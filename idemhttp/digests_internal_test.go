package idemhttp

import (
	"bytes"
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

// A record written with one "body:<name>" entry per member still names the
// changed fields, and so does one written with the single digests entry.
func TestMismatchFieldsReadsBothIntentForms(t *testing.T) {
	in := &input{object: true, digests: "amount=aa&to=bb"}
	for name, intent := range map[string]string{
		"per-member": `{"operation":"POST","fields":{"body:amount":"aa","body:to":"cc"}}`,
		"single":     `{"operation":"POST","fields":{"body_digests":"amount=aa&to=cc"}}`,
	} {
		got := mismatchFields(&idem.Record{Intent: []byte(intent)}, in)
		if len(got) != 1 || got[0] != "to" {
			t.Errorf("%s: fields %v, want [to]", name, got)
		}
	}
}

// fingerprintJSON must agree with the root package's two passes, which it
// replaces: the same fingerprint, the same digests, the same refusals.
func FuzzFingerprintJSON(f *testing.F) {
	for _, s := range []string{
		`{"amount":5000,"currency":"EUR","to":{"iban":"DE00","tags":["a","b,c}"]}}`,
		` { "b" : [1, 2.50, 1e3], "a" : null, "c" : "x\"}" } `, `{}`, `[]`, `"s"`, `17`, `{"a\nb":1,"c d":2}`,
		`{"é":"\u00e9","&=":true,"+%":false}`, `{"a":1,"a":2}`, `{"a":}`, `{"a":{"b":{}},"z":[[]]}`,
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
		want, werr := idem.TopLevelDigests(body)
		if object != (werr == nil) {
			t.Fatalf("object = %v, TopLevelDigests error %v", object, werr)
		}
		got := map[string]string{}
		decodeDigests(got, digests)
		if werr == nil && !maps.Equal(got, want) {
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
