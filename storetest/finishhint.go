package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// FinishWithClaim checks [idem.FinishParams].Claim, the caller's claim
// passed to Finish as a hint, on st. A store may build the finished record
// from the hint instead of reading it back; whatever it does, the record
// Finish returns must be the one Get then reads — after a fresh claim,
// after the stored record moved on (a heartbeat, a mark, an unknown
// outcome) and when the hint does not describe the stored record — a retry
// of the same outcome must succeed unchanged, another outcome must be
// fenced and write nothing, and a hint never makes a taken-over or
// released record writable.
//
// The conformance suite runs it on every store; a store that uses the hint
// should also run it on each kind of store it has (in a transaction,
// batched, with and without notifications). now is the time the records
// are written at; scope names keys that no other test uses.
func FinishWithClaim(t *testing.T, st idem.Store, scope string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	now = now.UTC().Truncate(time.Microsecond)
	claim := func(key, attempt string) idem.Record {
		t.Helper()
		r, err := st.Claim(ctx, idem.ClaimParams{Scope: scope, Key: key, Fingerprint: fp(key), AttemptID: attempt,
			Intent: []byte(`{"operation":"charge","amount":500}`), Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || !r.Claimed {
			t.Fatalf("Claim(%q): %+v, %v", key, r, err)
		}
		return r.Record
	}
	get := func(key string) *idem.Record {
		t.Helper()
		r, err := st.Get(ctx, scope, key)
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		return r
	}
	succeed := func(c idem.Record, hint idem.Record, result string, at time.Time) idem.FinishParams {
		return idem.FinishParams{Scope: c.Scope, Key: c.Key, Fence: c.Fence, AttemptID: c.AttemptID,
			State: idem.StateSucceeded, Result: []byte(result), CompletedAt: at, ExpiresAt: at.Add(time.Hour), Claim: hint}
	}

	cases := []struct {
		name   string
		before func(t *testing.T, c *idem.Record) // may change the store or the hint
	}{
		{"fresh claim", func(*testing.T, *idem.Record) {}},
		{"lease extended", func(t *testing.T, c *idem.Record) {
			if err := st.Heartbeat(ctx, idem.HeartbeatParams{Scope: c.Scope, Key: c.Key, Fence: c.Fence,
				AttemptID: c.AttemptID, LeaseUntil: c.LeaseUntil.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"mark set", func(t *testing.T, c *idem.Record) {
			if err := st.SetMark(ctx, c.Scope, c.Key, c.Fence, idem.MarkReconciled); err != nil {
				t.Fatal(err)
			}
		}},
		{"marked unknown", func(t *testing.T, c *idem.Record) {
			if _, err := st.Finish(ctx, idem.FinishParams{Scope: c.Scope, Key: c.Key, Fence: c.Fence,
				AttemptID: c.AttemptID, State: idem.StateUnknown, CompletedAt: now.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"hint with another fingerprint", func(_ *testing.T, c *idem.Record) { c.Fingerprint = fp("other") }},
		{"hint with another intent", func(_ *testing.T, c *idem.Record) { c.Intent = []byte(`{"op":"other"}`) }},
		{"hint with an empty intent", func(_ *testing.T, c *idem.Record) { c.Intent = []byte{} }},
		{"hint with no intent", func(_ *testing.T, c *idem.Record) { c.Intent = nil }},
		{"hint with another mark", func(_ *testing.T, c *idem.Record) { c.Mark = idem.MarkReconciled }},
		{"hint with another creation time", func(_ *testing.T, c *idem.Record) { c.CreatedAt = c.CreatedAt.Add(time.Microsecond) }},
		{"hint with no lease", func(_ *testing.T, c *idem.Record) { c.LeaseUntil = time.Time{} }},
	}
	for _, tc := range cases {
		key := "hint:" + tc.name
		c := claim(key, "a1")
		hint := c
		tc.before(t, &hint)
		p := succeed(c, hint, "result", now.Add(2*time.Second))
		rec, err := st.Finish(ctx, p)
		if err != nil {
			t.Fatalf("%s: Finish: %v", tc.name, err)
		}
		got := get(key)
		if got.State != idem.StateSucceeded || string(got.Result) != "result" {
			t.Fatalf("%s: stored after Finish: %+v", tc.name, got)
		}
		sameRecord(t, tc.name+": Finish", rec, got)
		// Retried with the same outcome: success, nothing changes.
		again, err := st.Finish(ctx, p)
		if err != nil {
			t.Fatalf("%s: retried Finish: %v", tc.name, err)
		}
		sameRecord(t, tc.name+": retried Finish", again, got)
		// Another outcome over the recorded one: fenced, not written.
		if _, err := st.Finish(ctx, succeed(c, hint, "other", now.Add(3*time.Second))); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("%s: second outcome: err = %v, want ErrFenced", tc.name, err)
		}
		if after := get(key); !reflect.DeepEqual(after, got) {
			t.Fatalf("%s: a refused Finish changed the record: %+v, was %+v", tc.name, after, got)
		}
	}

	// Taken over: re-driven under fence 2 by another attempt, or by the
	// same attempt id (then only the fence tells them apart), keeping every
	// column the hint describes but the fence and attempt.
	for _, redrive := range []struct {
		attempt string
		fence   int64 // the fence the stale Finish presents
	}{{"a2", 1}, {"a2", 2}, {"a1", 1}} {
		//idem:ignore sharednamespace a conformance fixture's key, never stored beyond the test
		key := "hint:taken:" + redrive.attempt + ":" + string(rune('0'+redrive.fence))
		c := claim(key, "a1")
		taken, err := st.Resolve(ctx, idem.ResolveParams{Scope: scope, Key: key, Fence: 1,
			From: []idem.State{idem.StateInProgress}, To: idem.StateInProgress,
			AttemptID: redrive.attempt, Now: now, LeaseUntil: c.LeaseUntil})
		if err != nil {
			t.Fatalf("Resolve(%q): %v", key, err)
		}
		hint := c
		hint.Fence = redrive.fence
		p := succeed(hint, hint, "late", now.Add(time.Second))
		if _, err := st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("Finish(fence %d, a1) over the record re-driven by %s: err = %v, want ErrFenced", redrive.fence, redrive.attempt, err)
		}
		if got := get(key); !reflect.DeepEqual(got, taken) {
			t.Fatalf("the re-driven record changed: %+v, want %+v", got, taken)
		}
	}

	// Released: absent, fenced.
	c := claim("hint:released", "a1")
	if err := st.Release(ctx, idem.ReleaseParams{Scope: scope, Key: c.Key, Fence: 1, AttemptID: "a1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, succeed(c, c, "r", now.Add(time.Second))); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish of a released claim: err = %v, want ErrFenced", err)
	}
}
