package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// cx bundles a store and a base time for contract tests.
type cx struct {
	t   *testing.T
	s   idem.Store
	ctx context.Context
	now time.Time
}

func newCx(t *testing.T, h Harness) *cx {
	return &cx{t: t, s: h.open(t), ctx: ctxT(t), now: time.Now().UTC().Truncate(time.Microsecond)}
}

func (c *cx) claim(scope, key, attempt string) idem.ClaimResult {
	c.t.Helper()
	r, err := c.s.Claim(c.ctx, idem.ClaimParams{Scope: scope, Key: key, Fingerprint: fp(key), AttemptID: attempt,
		Intent: []byte(`{"operation":"charge","amount":500}`), Now: c.now, LeaseUntil: c.now.Add(time.Minute)})
	if err != nil {
		c.t.Fatalf("Claim(%q, %q): %v", scope, key, err)
	}
	return r
}

func (c *cx) finish(r idem.Record, st idem.State, result string, ttl time.Duration) (*idem.Record, error) {
	p := idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID, State: st,
		Result: []byte(result), CompletedAt: c.now}
	if st == idem.StateUnknown {
		p.Result = nil
	} else {
		p.ExpiresAt = c.now.Add(ttl)
	}
	return c.s.Finish(c.ctx, p)
}

func (c *cx) get(scope, key string) *idem.Record {
	c.t.Helper()
	r, err := c.s.Get(c.ctx, scope, key)
	if err != nil {
		c.t.Fatalf("Get(%q, %q): %v", scope, key, err)
	}
	return r
}

// sameRecord fails unless a store's answer (from Claim or Finish) is the
// record Get then reads: a store that builds its answer instead of reading
// it back must build exactly what it wrote.
func sameRecord(t *testing.T, what string, got, stored *idem.Record) {
	t.Helper()
	same := got.Scope == stored.Scope && got.Key == stored.Key && got.Fingerprint == stored.Fingerprint &&
		got.State == stored.State && got.Fence == stored.Fence && got.AttemptID == stored.AttemptID &&
		string(got.Intent) == string(stored.Intent) && string(got.Result) == string(stored.Result) &&
		got.Mark == stored.Mark && got.CreatedAt.Equal(stored.CreatedAt) && got.LeaseUntil.Equal(stored.LeaseUntil) &&
		got.CompletedAt.Equal(stored.CompletedAt) && got.ExpiresAt.Equal(stored.ExpiresAt)
	if !same {
		t.Fatalf("%s returned %+v, but the store holds %+v", what, *got, *stored)
	}
}

func mustFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("%s: got %v, want ErrFenced", what, err)
	}
}

func runContract(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, c *cx)
	}{
		{"ClaimNew", contractClaimNew},
		{"ClaimDuplicateReturnsExisting", contractClaimDuplicate},
		{"ClaimLostAnswer", contractClaimLostAnswer},
		{"ClaimExpiredIsNewIntent", contractClaimExpired},
		{"ClaimConcurrentOneWinner", contractClaimConcurrent},
		{"FinishFenced", contractFinishFenced},
		{"FinishRetryAndLateTruth", contractFinishRetry},
		{"FinishWithClaimHint", func(t *testing.T, c *cx) { FinishWithClaim(t, c.s, "hint", c.now) }},
		{"Release", contractRelease},
		{"Heartbeat", contractHeartbeat},
		{"Resolve", contractResolve},
		{"SetMark", contractSetMark},
		{"ScopeIsolation", contractScope},
		{"KeyBytesRoundTrip", contractKeyBytes},
		{"List", contractList},
		{"Sweep", contractSweep},
		{"Closed", contractClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			Deadline(t, h.deadline())
			tc.fn(t, newCx(t, h))
		})
	}
}

func contractClaimNew(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1")
	if !r.Claimed {
		t.Fatal("first claim not Claimed")
	}
	got := c.get("s", "k")
	if got.State != idem.StateInProgress || got.Fence != 1 || got.AttemptID != "a1" || got.Fingerprint != fp("k") {
		t.Fatalf("claimed record = %+v", got)
	}
	if !got.CreatedAt.Equal(c.now) || !got.LeaseUntil.Equal(c.now.Add(time.Minute)) {
		t.Fatalf("times not kept at microsecond precision: created %v lease %v, want %v", got.CreatedAt, got.LeaseUntil, c.now)
	}
	if string(got.Intent) != `{"operation":"charge","amount":500}` {
		t.Fatalf("intent = %q", got.Intent)
	}
	if _, err := c.s.Get(c.ctx, "s", "absent"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get(absent) = %v, want ErrNotFound", err)
	}
	sameRecord(t, "Claim", &r.Record, got)
	for _, tc := range []struct {
		st     idem.State
		result string
	}{{idem.StateSucceeded, "v"}, {idem.StateFailed, "no"}, {idem.StateUnknown, ""}} {
		k := "k-" + string(tc.st)
		cr := c.claim("s", k, "a1")
		f, err := c.finish(cr.Record, tc.st, tc.result, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, "Finish("+string(tc.st)+")", f, c.get("s", k))
	}
}

func contractClaimDuplicate(t *testing.T, c *cx) {
	first := c.claim("s", "k", "a1")
	for _, st := range []idem.State{idem.StateInProgress, idem.StateUnknown, idem.StateSucceeded} {
		if st == idem.StateUnknown {
			if _, err := c.finish(first.Record, idem.StateUnknown, "", 0); err != nil {
				t.Fatal(err)
			}
		}
		if st == idem.StateSucceeded {
			if _, err := c.finish(first.Record, idem.StateSucceeded, "v", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		dup := c.claim("s", "k", "a2")
		if dup.Claimed {
			t.Fatalf("duplicate claim of a %s record was Claimed", st)
		}
		if dup.Record.State != st || dup.Record.AttemptID != "a1" || dup.Record.Fence != 1 {
			t.Fatalf("duplicate returned %+v, want the existing %s record of a1", dup.Record, st)
		}
	}
	if got := c.get("s", "k"); string(got.Result) != "v" {
		t.Fatalf("result = %q", got.Result)
	}
}

func contractClaimLostAnswer(t *testing.T, c *cx) {
	c.claim("s", "k", "a1")
	again := c.claim("s", "k", "a1") // the first answer was lost; same attempt retries
	if !again.Claimed || again.Record.Fence != 1 {
		t.Fatalf("retried claim by the same attempt: %+v, want Claimed with fence 1", again)
	}
	// Only an in-progress record is the attempt's to proceed on: once its
	// outcome is recorded, or it went unknown, a claim with its attempt id
	// gets the record, never the key (the effect would run again).
	if _, err := c.finish(again.Record, idem.StateSucceeded, "done", time.Hour); err != nil {
		t.Fatal(err)
	}
	if late := c.claim("s", "k", "a1"); late.Claimed || late.Record.State != idem.StateSucceeded {
		t.Fatalf("claim by the attempt that recorded the outcome: %+v, want the recorded outcome, not Claimed", late)
	}
	u := c.claim("s", "u", "b1")
	if _, err := c.finish(u.Record, idem.StateUnknown, "", 0); err != nil {
		t.Fatal(err)
	}
	if late := c.claim("s", "u", "b1"); late.Claimed || late.Record.State != idem.StateUnknown {
		t.Fatalf("claim by the attempt whose record went unknown: %+v, want the unknown record, not Claimed", late)
	}
}

func contractClaimExpired(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1")
	if _, err := c.finish(r.Record, idem.StateSucceeded, "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Not yet expired: replay.
	c.now = c.now.Add(59 * time.Second)
	if c.claim("s", "k", "a2").Claimed {
		t.Fatal("claim before expiry was Claimed")
	}
	// Expired: a new intent under fence 2.
	c.now = c.now.Add(time.Second)
	n := c.claim("s", "k", "a3")
	if !n.Claimed || n.Record.Fence != 2 || n.Record.State != idem.StateInProgress || len(n.Record.Result) != 0 {
		t.Fatalf("claim after expiry = %+v, want a fresh in_progress record with fence 2", n)
	}
	// The old attempt can no longer write.
	_, err := c.finish(r.Record, idem.StateFailed, "late", time.Hour)
	mustFenced(t, "finish by the expired attempt", err)
	// Unknown never expires.
	u := c.claim("s", "u", "b1")
	if _, err := c.finish(u.Record, idem.StateUnknown, "", 0); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(100 * 365 * 24 * time.Hour)
	if c.claim("s", "u", "b2").Claimed {
		t.Fatal("an unknown record was re-claimed after a long time")
	}
}

func contractClaimConcurrent(t *testing.T, c *cx) {
	const n = 64
	var wins atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := c.s.Claim(c.ctx, idem.ClaimParams{Scope: "s", Key: "hot", Fingerprint: fp("hot"),
				AttemptID: fmt.Sprintf("a%d", i), Now: c.now, LeaseUntil: c.now.Add(time.Minute)})
			if err != nil {
				errs <- err
				return
			}
			if r.Claimed {
				wins.Add(1)
			} else if r.Record.Key != "hot" || r.Record.State != idem.StateInProgress {
				errs <- fmt.Errorf("loser got record %+v", r.Record)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if w := wins.Load(); w != 1 {
		t.Fatalf("%d concurrent claims won, want exactly 1", w)
	}
}

func contractFinishFenced(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	wrongFence, wrongAttempt := r, r
	wrongFence.Fence++
	wrongAttempt.AttemptID = "intruder"
	_, err := c.finish(wrongFence, idem.StateSucceeded, "x", time.Hour)
	mustFenced(t, "finish with another fence", err)
	_, err = c.finish(wrongAttempt, idem.StateSucceeded, "x", time.Hour)
	mustFenced(t, "finish with another attempt", err)
	// Marking unknown is as fenced as recording an outcome.
	_, err = c.finish(wrongFence, idem.StateUnknown, "", 0)
	mustFenced(t, "unknown with another fence", err)
	_, err = c.finish(wrongAttempt, idem.StateUnknown, "", 0)
	mustFenced(t, "unknown with another attempt", err)
	if got := c.get("s", "k"); got.State != idem.StateInProgress || len(got.Result) != 0 {
		t.Fatalf("a fenced finish wrote: %+v", got)
	}
	if _, err := c.finish(r, idem.StateSucceeded, "ok", time.Hour); err != nil {
		t.Fatal(err)
	}
	got := c.get("s", "k")
	if got.State != idem.StateSucceeded || string(got.Result) != "ok" || !got.CompletedAt.Equal(c.now) || !got.ExpiresAt.Equal(c.now.Add(time.Hour)) {
		t.Fatalf("finished record = %+v", got)
	}
	// Terminal is final for this attempt: no flip to failed or unknown.
	_, err = c.finish(r, idem.StateFailed, "no", time.Hour)
	mustFenced(t, "second, different outcome", err)
	_, err = c.finish(r, idem.StateUnknown, "", 0)
	mustFenced(t, "unknown after succeeded", err)
	// Heartbeat/release on a terminal record are refused.
	mustFenced(t, "heartbeat on terminal", c.s.Heartbeat(c.ctx, idem.HeartbeatParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID, LeaseUntil: c.now.Add(time.Hour)}))
	mustFenced(t, "release of terminal", c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID}))
	if got := c.get("s", "k"); got.State != idem.StateSucceeded {
		t.Fatalf("record changed: %+v", got)
	}
}

func contractFinishRetry(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	if _, err := c.finish(r, idem.StateSucceeded, "ok", time.Hour); err != nil {
		t.Fatal(err)
	}
	// A retried write whose answer was lost succeeds.
	got, err := c.finish(r, idem.StateSucceeded, "ok", time.Hour)
	if err != nil || got.State != idem.StateSucceeded {
		t.Fatalf("retried identical finish = %+v, %v", got, err)
	}
	// Only an identical write is a retry: the same state with another
	// result is refused, and the record keeps the first.
	_, err = c.finish(r, idem.StateSucceeded, "other", time.Hour)
	mustFenced(t, "finish with the same state and another result", err)
	if got := c.get("s", "k"); string(got.Result) != "ok" {
		t.Fatalf("after a refused finish the record holds %q, want %q", got.Result, "ok")
	}
	// Marking unknown keeps the fence; the holder's late truth is accepted.
	u := c.claim("s", "late", "b1").Record
	ur, err := c.finish(u, idem.StateUnknown, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ur.State != idem.StateUnknown || ur.Fence != u.Fence || !ur.ExpiresAt.IsZero() {
		t.Fatalf("unknown record = %+v, want same fence, no expiry", ur)
	}
	if _, err := c.finish(u, idem.StateUnknown, "", 0); err != nil {
		t.Fatalf("retried mark-unknown: %v", err)
	}
	lr, err := c.finish(u, idem.StateFailed, "declined", time.Hour)
	if err != nil || lr.State != idem.StateFailed || string(lr.Result) != "declined" {
		t.Fatalf("late truth after unknown = %+v, %v", lr, err)
	}
}

func contractRelease(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	other := r
	other.AttemptID = "intruder"
	mustFenced(t, "release by another attempt", c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "k", Fence: other.Fence, AttemptID: other.AttemptID}))
	if err := c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Get(c.ctx, "s", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after release Get = %v, want ErrNotFound", err)
	}
	if err := c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID}); err != nil {
		t.Fatalf("retried release of an absent record: %v", err)
	}
	n := c.claim("s", "k", "a2")
	if !n.Claimed {
		t.Fatal("released key could not be claimed again")
	}
	// The attempt from before the release cannot write into the new claim,
	// even though a fresh claim may reuse its fence number.
	_, err := c.finish(r, idem.StateSucceeded, "stale", time.Hour)
	mustFenced(t, "finish by the released attempt", err)
	mustFenced(t, "release by the released attempt", c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID}))
	// A holder may release after its record went unknown (late truth).
	u := c.claim("s", "u", "b1").Record
	if _, err := c.finish(u, idem.StateUnknown, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "u", Fence: u.Fence, AttemptID: u.AttemptID}); err != nil {
		t.Fatalf("release after unknown: %v", err)
	}
	// A recorded outcome is never released, not even by the attempt that
	// recorded it: its replays would be lost and the effect run again.
	d := c.claim("s", "d", "c1").Record
	if _, err := c.finish(d, idem.StateSucceeded, "done", time.Hour); err != nil {
		t.Fatal(err)
	}
	mustFenced(t, "release of a recorded outcome by its own attempt", c.s.Release(c.ctx, idem.ReleaseParams{Scope: "s", Key: "d", Fence: d.Fence, AttemptID: d.AttemptID}))
	if got := c.get("s", "d"); got.State != idem.StateSucceeded || string(got.Result) != "done" {
		t.Fatalf("after a refused release the record is %+v, want the recorded outcome", got)
	}
}

func contractHeartbeat(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	until := c.now.Add(time.Hour)
	if err := c.s.Heartbeat(c.ctx, idem.HeartbeatParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID, LeaseUntil: until}); err != nil {
		t.Fatal(err)
	}
	if got := c.get("s", "k"); !got.LeaseUntil.Equal(until) {
		t.Fatalf("lease = %v, want %v", got.LeaseUntil, until)
	}
	mustFenced(t, "heartbeat by another attempt", c.s.Heartbeat(c.ctx, idem.HeartbeatParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: "x", LeaseUntil: until.Add(time.Hour)}))
	if _, err := c.finish(r, idem.StateUnknown, "", 0); err != nil {
		t.Fatal(err)
	}
	mustFenced(t, "heartbeat on unknown", c.s.Heartbeat(c.ctx, idem.HeartbeatParams{Scope: "s", Key: "k", Fence: r.Fence, AttemptID: r.AttemptID, LeaseUntil: until.Add(time.Hour)}))
	if got := c.get("s", "k"); !got.LeaseUntil.Equal(until) {
		t.Fatal("a fenced heartbeat moved the lease")
	}
}

func contractResolve(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	_, err := c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", To: idem.StateSucceeded, AttemptID: "op", Now: c.now})
	mustFenced(t, "resolve of an in_progress record with From=unknown", err)
	if _, err := c.finish(r, idem.StateUnknown, "", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", Fence: r.Fence + 5, To: idem.StateSucceeded, AttemptID: "op", Now: c.now})
	mustFenced(t, "resolve with a wrong fence", err)
	res, err := c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", Fence: r.Fence, To: idem.StateSucceeded,
		AttemptID: "op", Result: []byte("settled"), Now: c.now, ExpiresAt: c.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fence != r.Fence+1 || res.State != idem.StateSucceeded || res.AttemptID != "op" || string(res.Result) != "settled" || !res.ExpiresAt.Equal(c.now.Add(time.Hour)) {
		t.Fatalf("resolved record = %+v", res)
	}
	// The original holder's late write is refused after a resolution.
	_, err = c.finish(r, idem.StateFailed, "late", time.Hour)
	mustFenced(t, "late finish after resolve", err)
	// Force-style resolution from succeeded back, and re-drive to in_progress.
	rd, err := c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", From: []idem.State{idem.StateSucceeded}, To: idem.StateInProgress,
		AttemptID: "redrive", Now: c.now, LeaseUntil: c.now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if rd.State != idem.StateInProgress || rd.Fence != r.Fence+2 || len(rd.Result) != 0 || !rd.LeaseUntil.Equal(c.now.Add(time.Minute)) || !rd.CompletedAt.IsZero() {
		t.Fatalf("re-driven record = %+v", rd)
	}
	if _, err := c.finish(*rd, idem.StateSucceeded, "again", time.Hour); err != nil {
		t.Fatalf("finish by the re-drive attempt: %v", err)
	}
	// Without From, only an unknown record is resolved: a decided one
	// (succeeded here, failed below) is refused and left as it is.
	decided := c.get("s", "k")
	_, err = c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", To: idem.StateFailed, AttemptID: "op-default", Now: c.now})
	mustFenced(t, "resolve of a succeeded record with the default From", err)
	sameRecord(t, "a refused resolve", decided, c.get("s", "k"))
	f := c.claim("s", "failed", "f1").Record
	if _, err := c.finish(f, idem.StateFailed, "declined", time.Hour); err != nil {
		t.Fatal(err)
	}
	failed := c.get("s", "failed")
	_, err = c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "failed", To: idem.StateSucceeded, AttemptID: "op-default", Now: c.now})
	mustFenced(t, "resolve of a failed record with the default From", err)
	sameRecord(t, "a refused resolve", failed, c.get("s", "failed"))
	// Release through resolve deletes.
	if _, err := c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", From: []idem.State{idem.StateSucceeded}, Release: true, AttemptID: "op2", Now: c.now}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Get(c.ctx, "s", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after resolve-release Get = %v", err)
	}
	if _, err := c.s.Resolve(c.ctx, idem.ResolveParams{Scope: "s", Key: "k", To: idem.StateFailed, AttemptID: "op3", Now: c.now}); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("resolve of absent = %v, want ErrNotFound", err)
	}
}

func contractSetMark(t *testing.T, c *cx) {
	r := c.claim("s", "k", "a1").Record
	f, err := c.finish(r, idem.StateSucceeded, "v", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.s.SetMark(c.ctx, "s", "k", f.Fence, idem.MarkReconciled); err != nil {
		t.Fatal(err)
	}
	got := c.get("s", "k")
	if got.Mark != idem.MarkReconciled || got.State != idem.StateSucceeded || string(got.Result) != "v" {
		t.Fatalf("marked record = %+v", got)
	}
	mustFenced(t, "mark with old fence", c.s.SetMark(c.ctx, "s", "k", f.Fence+1, idem.MarkDrift))
	if err := c.s.SetMark(c.ctx, "s", "nope", 1, idem.MarkDrift); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("mark of absent = %v", err)
	}
}

func contractScope(t *testing.T, c *cx) {
	// The same key, fence and attempt id in two scopes: only the scope
	// tells the records apart, so every write must compare it.
	a := c.claim("tenant-a", "k", "shared")
	b := c.claim("tenant-b", "k", "shared")
	if !a.Claimed || !b.Claimed {
		t.Fatal("the same key in two scopes must be two intents")
	}
	if _, err := c.finish(a.Record, idem.StateSucceeded, "for-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := c.get("tenant-b", "k"); got.State != idem.StateInProgress || len(got.Result) != 0 {
		t.Fatalf("scope b sees %+v", got)
	}
	// An expired record is re-claimed in its own scope only: scope a's
	// record expires first, and a claim in scope b still replays b's.
	if _, err := c.finish(b.Record, idem.StateSucceeded, "for-b", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	later := *c
	later.now = c.now.Add(90 * time.Minute)
	if rb := later.claim("tenant-b", "k", "b2"); rb.Claimed || rb.Record.Scope != "tenant-b" || string(rb.Record.Result) != "for-b" {
		t.Fatalf("claim in scope b after scope a's record expired = %+v, want b's replay", rb)
	}
	if got := c.get("tenant-a", "k"); got.State != idem.StateSucceeded || got.Fence != a.Record.Fence || string(got.Result) != "for-a" {
		t.Fatalf("a claim in scope b changed scope a's record: %+v", got)
	}
	if ra := later.claim("tenant-a", "k", "a2"); !ra.Claimed || ra.Record.Scope != "tenant-a" || ra.Record.Fence != a.Record.Fence+1 {
		t.Fatalf("re-claim of scope a's expired record = %+v, want scope a, fence %d", ra, a.Record.Fence+1)
	}
	if got := c.get("tenant-b", "k"); got.State != idem.StateSucceeded || string(got.Result) != "for-b" {
		t.Fatalf("re-claim in scope a changed scope b's record: %+v", got)
	}
	// Scope and key are not concatenated ambiguously.
	x := c.claim("ab", "c", "x1")
	y := c.claim("a", "bc", "y1")
	if !x.Claimed || !y.Claimed {
		t.Fatal("(ab,c) and (a,bc) collided")
	}
	recs, err := c.s.List(c.ctx, idem.ListFilter{Scope: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Scope != "tenant-a" {
		t.Fatalf("List(scope a) = %+v", recs)
	}
}

func contractKeyBytes(t *testing.T, c *cx) {
	keys := []string{"a:b%3Ac", " spaced key ", strings.Repeat("x", idem.MaxKeyLen), `q"u'o\te`, "K", "k"}
	for i, k := range keys {
		if !c.claim("s", k, fmt.Sprint("a", i)).Claimed {
			t.Fatalf("claim %q was not new (collision with another key?)", k)
		}
	}
	for _, k := range keys {
		if got := c.get("s", k); got.Key != k {
			t.Fatalf("key %q came back as %q", k, got.Key)
		}
	}
	r := c.claim("s", "bin", "z").Record
	val := []byte{0, 1, 2, 255, '\n', 0}
	if _, err := c.s.Finish(c.ctx, idem.FinishParams{Scope: "s", Key: "bin", Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: val, CompletedAt: c.now, ExpiresAt: c.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := c.get("s", "bin"); !bytes.Equal(got.Result, val) {
		t.Fatalf("binary result = %v, want %v", got.Result, val)
	}
}

func contractList(t *testing.T, c *cx) {
	base := c.now
	for i := 0; i < 5; i++ {
		c.now = base.Add(time.Duration(i) * time.Second)
		r := c.claim("s", fmt.Sprintf("k%d", i), fmt.Sprintf("a%d", i)).Record
		if i%2 == 0 {
			if _, err := c.finish(r, idem.StateUnknown, "", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := c.s.List(c.ctx, idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("List() = %d records, want 5", len(all))
	}
	for i := range all {
		if all[i].Key != fmt.Sprintf("k%d", i) {
			t.Fatalf("List order: position %d is %q", i, all[i].Key)
		}
	}
	unk, err := c.s.List(c.ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown}})
	if err != nil {
		t.Fatal(err)
	}
	if len(unk) != 3 || unk[0].Key != "k0" || unk[2].Key != "k4" {
		t.Fatalf("List(unknown) = %v", keysOf(unk))
	}
	old, err := c.s.List(c.ctx, idem.ListFilter{CreatedBefore: base.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 2 {
		t.Fatalf("List(created before +2s) = %v", keysOf(old))
	}
	// Pagination with a cursor visits each record once.
	var seen []string
	var cur *idem.Cursor
	for page := 0; page < 10; page++ {
		recs, err := c.s.List(c.ctx, idem.ListFilter{Limit: 2, After: cur})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		seen = append(seen, keysOf(recs)...)
		last := recs[len(recs)-1]
		cur = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
	}
	if strings.Join(seen, ",") != "k0,k1,k2,k3,k4" {
		t.Fatalf("paged listing = %v", seen)
	}
}

func keysOf(recs []idem.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

func contractSweep(t *testing.T, c *cx) {
	mk := func(key string, st idem.State, ttl time.Duration) {
		r := c.claim("s", key, "a-"+key).Record
		if st != idem.StateInProgress {
			if _, err := c.finish(r, st, "v", ttl); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 5; i++ {
		mk(fmt.Sprintf("old-ok-%d", i), idem.StateSucceeded, time.Minute)
	}
	mk("old-failed", idem.StateFailed, time.Minute)
	mk("fresh", idem.StateSucceeded, time.Hour)
	mk("unknown", idem.StateUnknown, 0)
	mk("running", idem.StateInProgress, 0)
	now := c.now.Add(10 * time.Minute)
	n, err := c.s.Sweep(c.ctx, idem.SweepParams{Now: now, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("first bounded sweep deleted %d, want 4 (the limit)", n)
	}
	n2, err := c.s.Sweep(c.ctx, idem.SweepParams{Now: now, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if n2 != 2 {
		t.Fatalf("second sweep deleted %d, want the 2 remaining expired", n2)
	}
	left, err := c.s.List(c.ctx, idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(sortedKeys(left), ",")
	if got != "fresh,running,unknown" {
		t.Fatalf("after sweep: %s, want fresh,running,unknown", got)
	}
	// Far in the future, unknown and in_progress still survive, also an
	// unbounded sweep (Limit 0), as the Sweeper and the CLI may run it.
	mk("far-ok", idem.StateSucceeded, time.Hour)
	n3, err := c.s.Sweep(c.ctx, idem.SweepParams{Now: now.Add(1000 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if n3 != 2 {
		t.Fatalf("unbounded sweep deleted %d, want 2 (fresh, far-ok)", n3)
	}
	left, _ = c.s.List(c.ctx, idem.ListFilter{})
	if got := strings.Join(sortedKeys(left), ","); got != "running,unknown" {
		t.Fatalf("after a far-future sweep: %s, want running,unknown", got)
	}
}

func sortedKeys(recs []idem.Record) []string {
	ks := keysOf(recs)
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

func contractClosed(t *testing.T, c *cx) {
	c.claim("s", "k", "a1")
	if err := c.s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := c.s.Claim(c.ctx, idem.ClaimParams{Scope: "s", Key: "k2", AttemptID: "a", Now: c.now, LeaseUntil: c.now.Add(time.Minute)})
	if !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Claim after Close = %v, want ErrClosed", err)
	}
	if _, err := c.s.Get(c.ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
}
