package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestPlainProgressHasNoCarriageReturns: progress written to a log (not a
// terminal) is one plain line per finished cell.
func TestPlainProgressHasNoCarriageReturns(t *testing.T) {
	for _, plain := range []bool{false, true} {
		var b bytes.Buffer
		p := &progress{w: &b, plain: plain, total: 2}
		for _, side := range []string{"raw", "idem"} {
			p.start("first", side, 16)
			p.finish(Cell{Scenario: "first", Side: side, Concurrency: 16, OpsPerSec: 1000})
		}
		p.done()
		out := b.String()
		if got := strings.Contains(out, "\r"); got == plain {
			t.Errorf("plain=%v: carriage returns %v in %q", plain, got, out)
		}
		if plain && strings.Count(out, "\n") != 2 {
			t.Errorf("plain progress = %q; want one line per finished cell", out)
		}
	}
}
