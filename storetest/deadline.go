package storetest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// DefaultDeadline bounds each test of the suite when [Harness].Deadline is
// zero: far beyond what a case takes on a loaded machine under the race
// detector, far short of go test's own timeout.
const DefaultDeadline = 2 * time.Minute

// Deadline bounds t: if t has not finished within d, the test binary ends
// at once with a message naming t and every goroutine's stack, instead of
// hanging until go test's -timeout (ten minutes by default) with nothing
// said about which test. A store that blocks — a lock never released, a
// claim made outside a caller's transaction and waiting on it — then fails
// the run fast. The binary ends (a panic on the timer's goroutine) because
// a blocked test cannot be made to return: its goroutine is stuck in the
// store.
//
// The conformance suite puts each of its tests under [Harness].Deadline;
// suites of their own (a consumer's) call it at their start.
func Deadline(t testing.TB, d time.Duration) {
	t.Helper()
	name := t.Name()
	start := time.Now()
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "storetest: %s did not finish within its deadline of %s (it started %s ago): a store call blocks "+
			"(a lock never released? a claim waiting on a transaction that waits on it?). Every goroutine:\n\n%s\n",
			name, d, time.Since(start).Round(time.Millisecond), buf)
		panic("storetest: " + name + " exceeded its deadline of " + d.String())
	})
	t.Cleanup(func() { timer.Stop() })
}

// deadline is the bound on each test of the suite.
func (h Harness) deadline() time.Duration {
	if h.Deadline > 0 {
		return h.Deadline
	}
	return DefaultDeadline
}
