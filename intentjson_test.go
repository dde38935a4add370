package idem

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestEncodeIntentMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "charge", "a\"b\\c", "<tag>&amp;", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"caf\u00e9 \u2028 \u2029 \U0001F600", "bad\xffutf8\xc3", "\xed\xa0\x80", "body_digests"}
	cases := []*Intent{{}, {Amount: -5}, {Operation: "op", Amount: 5000, Currency: "EUR", Counterparty: "psp", ForwardKey: "fk"}}
	for _, s := range strs {
		cases = append(cases,
			&Intent{Operation: s, Currency: s, Counterparty: s, ForwardKey: s, Origin: s},
			&Intent{Fields: map[string]string{s: s, "z" + s: "v", "a": s}},
			&Intent{Operation: "x", Fields: map[string]string{}})
	}
	for _, in := range cases {
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeIntent(in); !bytes.Equal(got, want) {
			t.Errorf("encodeIntent(%+v)\n got %s\nwant %s", in, got, want)
		}
	}
}

func FuzzEncodeIntent(f *testing.F) {
	f.Add("op", "EUR", "k", "v", int64(3))
	f.Add("<\u2028>", "\xff", "\x00", "\"\\", int64(-1))
	f.Fuzz(func(t *testing.T, op, cur, k, v string, amount int64) {
		in := &Intent{Operation: op, Currency: cur, Amount: amount, Origin: k, Fields: map[string]string{k: v, v: k}}
		want, err := json.Marshal(in)
		if err != nil {
			t.Skip()
		}
		if got := encodeIntent(in); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
