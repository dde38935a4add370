package idemtestexample

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

const chargeBody = `{"amount":100,"currency":"EUR","order":"42"}`

func chargeCase(l *Ledger) idemtest.Case {
	return idemtest.Case{Path: "/charges", Body: chargeBody, Effects: l.Count, Concurrency: 16}
}

// The correct handler passes every check.
func TestCorrectHandlerPasses(t *testing.T) {
	l := &Ledger{}
	idemtest.HTTP(t, &idemtest.Built{Build: Correct(l), Config: idem.Config{Lease: time.Second}}, chargeCase(l))
}

// recorder stands in for the test's *testing.T and keeps idemtest's
// failures, so that these tests can assert them.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(f, a...))
	r.mu.Unlock()
}

// caught asserts that check c failed with a message holding every want,
// and logs what idemtest said.
func (r *recorder) caught(t *testing.T, c idemtest.Check, want ...string) {
	t.Helper()
	for _, e := range r.errs {
		t.Log(e)
	}
	var msg string
	for _, e := range r.errs {
		if strings.HasPrefix(e, "idemtest: "+string(c)+":") {
			msg += e + "\n"
		}
	}
	if msg == "" {
		t.Fatalf("idemtest did not report a %s failure", c)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the %s failure does not say %q", c, w)
		}
	}
}

func TestCheckThenActIsCaught(t *testing.T) {
	l := &Ledger{}
	r := &recorder{}
	idemtest.HTTP(r, CheckThenAct(l), chargeCase(l))
	r.caught(t, idemtest.Concurrency, "16 times at once", "want exactly 1", "check-then-act")
}

func TestUUIDKeyIsCaught(t *testing.T) {
	l := &Ledger{}
	r := &recorder{}
	idemtest.HTTP(r, &idemtest.Built{Build: UUIDKey(l), Config: idem.Config{Lease: time.Second}}, chargeCase(l))
	r.caught(t, idemtest.Replay, "twice", "the effect ran 2 time(s)", "never from a value made per request (a uuid")
}

func TestNoFingerprintIsCaught(t *testing.T) {
	l := &Ledger{}
	r := &recorder{}
	idemtest.HTTP(r, &idemtest.Built{Build: NoFingerprint(l), Config: idem.Config{Lease: time.Second}}, chargeCase(l))
	r.caught(t, idemtest.Divergence, "idem_changed", "want a refusal (HTTP 422", "fingerprint the request")
}
