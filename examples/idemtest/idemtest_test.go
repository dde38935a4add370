package idemtestexample

import (
	"strings"
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

// caught asserts that check c failed in rec with a message holding every
// want, and logs what idemtest said.
func caught(t *testing.T, rec *idemtest.Recorder, c idemtest.Check, want ...string) {
	t.Helper()
	for _, e := range rec.All() {
		t.Log(e)
	}
	msg := strings.Join(rec.Failures(c), "\n")
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
	r := &idemtest.Recorder{}
	idemtest.HTTP(r, CheckThenAct(l), chargeCase(l))
	caught(t, r, idemtest.Concurrency, "16 times at once", "want exactly 1", "check-then-act")
}

func TestUUIDKeyIsCaught(t *testing.T) {
	l := &Ledger{}
	r := &idemtest.Recorder{}
	idemtest.HTTP(r, &idemtest.Built{Build: UUIDKey(l), Config: idem.Config{Lease: time.Second}}, chargeCase(l))
	caught(t, r, idemtest.Replay, "twice", "the effect ran 2 time(s)", "never from a value made per request (a uuid")
}

func TestNoFingerprintIsCaught(t *testing.T) {
	l := &Ledger{}
	r := &idemtest.Recorder{}
	idemtest.HTTP(r, &idemtest.Built{Build: NoFingerprint(l), Config: idem.Config{Lease: time.Second}}, chargeCase(l))
	caught(t, r, idemtest.Divergence, "idem_changed", "want a refusal (HTTP 422", "fingerprint the request")
}
