package idemhttp

import (
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
