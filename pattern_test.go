package idem_test

import (
	"testing"

	"github.com/idemkit/idem"
)

func TestMatchPattern(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"", "/anything", true},
		{"/v1/", "/v1/charges", true},
		{"/v1/", "/v2/charges", false},
		{"/v1/charges", "/v1/charges", true},
		{"/v1/*", "/v1/refunds", true},
		{"/v1/*", "/v1/a/b", false},
		{"/pay.Payments/*", "/pay.Payments/Charge", true},
		{"[", "[", false}, // malformed: matches nothing
	} {
		if got := idem.MatchPattern(c.p, c.s); got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
}
