package idem

import (
	"testing"
	"time"
)

// TestSpoolKeepsTheLaterClaimsOutcome: two outcomes of one key are spooled
// under different claims (an attempt, then, after a re-claim, another).
// The later claim's (the higher fence) is the one a duplicate is answered
// from, whatever order they are added in or the directory lists them in
// (fence 10's file sorts before fence 2's).
func TestSpoolKeepsTheLaterClaimsOutcome(t *testing.T) {
	dir := t.TempDir()
	sp, err := OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	outcome := func(fence int64, result string) *SpooledOutcome {
		return &SpooledOutcome{Key: "k", Fence: fence, AttemptID: result, State: StateSucceeded, Result: []byte(result),
			CompletedAt: now, ExpiresAt: now.Add(time.Hour), SpooledAt: now}
	}
	for _, o := range []*SpooledOutcome{outcome(10, "later"), outcome(2, "earlier")} {
		if err := sp.add(o); err != nil {
			t.Fatal(err)
		}
	}
	if o, ok := sp.lookup("", "k"); !ok || string(o.Result) != "later" {
		t.Fatalf("lookup = %+v, %v; want the later claim's outcome", o, ok)
	}
	reopened, err := OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := reopened.lookup("", "k"); !ok || string(o.Result) != "later" {
		t.Fatalf("lookup after reopening = %+v, %v; want the later claim's outcome", o, ok)
	}
}
