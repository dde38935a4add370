package statecode

import (
	"testing"

	"github.com/idemkit/idem"
)

// The codes round-trip, are distinct, and refuse anything else.
func TestCodesRoundTrip(t *testing.T) {
	seen := map[byte]bool{}
	for _, st := range []idem.State{idem.StateInProgress, idem.StateSucceeded, idem.StateFailed, idem.StateUnknown} {
		c := Of(st)
		if back, ok := State(c); !ok || back != st || seen[c] || c == 0 {
			t.Errorf("%s: code %q reads back as %q, %v", st, c, back, ok)
		}
		seen[c] = true
	}
	if c := Of("bogus"); c != 0 {
		t.Errorf("Of(bogus) = %q", c)
	}
	if _, ok := State('x'); ok {
		t.Error("State('x') is a state")
	}
}
