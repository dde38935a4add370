package idemhttp

import (
	"maps"
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
	in := &input{digests: map[string]string{"amount": "aa", "to": "bb"}}
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
