package main

import (
	"context"
	"strings"
	"testing"
)

// TestInbox runs the example: a redelivery is acked without a second ledger
// row, a same-id different payload is dead-lettered as a mismatch, a failed
// message writes no row, and the ledger ends with exactly one row per
// applied message.
func TestInbox(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	squash := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"m-1 (delivery 1): ack first",
		"m-1 (delivery 2): ack replay",
		"m-2 (delivery 2): dead_letter mismatch",
		"m-3 (delivery 1): dead_letter failed",
		"ledger: m-1 alice 500 m-2 bob 70 m-4 carol 12345",
	} {
		if !strings.Contains(squash, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.HasSuffix(squash, "12345") {
		t.Errorf("ledger has rows beyond m-4:\n%s", out.String())
	}
}
