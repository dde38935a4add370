package idemtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Recorder is a testing.TB that keeps idemtest's failures instead of
// failing the test: it is for tests that show a check catches a
// deliberately broken handler.
//
//	rec := &idemtest.Recorder{}
//	idemtest.HTTP(rec, brokenHandler, c)
//	if len(rec.Failures(idemtest.Concurrency)) == 0 {
//		t.Fatal("idemtest did not catch the check-then-act handler")
//	}
//
// It implements what idemtest calls (Helper, Errorf, Logf); any other
// testing.TB method panics. It is safe for concurrent use.
type Recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

// Helper does nothing.
func (r *Recorder) Helper() {}

// Logf discards the log.
func (r *Recorder) Logf(string, ...any) {}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// All returns every failure recorded, in order.
func (r *Recorder) All() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// Failures returns the failures of check c, in order.
func (r *Recorder) Failures(c Check) []string {
	var out []string
	for _, e := range r.All() {
		if strings.HasPrefix(e, "idemtest: "+string(c)+":") {
			out = append(out, e)
		}
	}
	return out
}
