package sqlitestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestFinishFencedOnFenceAndAttempt(t *testing.T) {
	s := newStore(t)
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	ctx := context.Background()

	staleFence := finishParams(r, idem.StateSucceeded, "ok")
	staleFence.Fence++
	otherAttempt := finishParams(r, idem.StateSucceeded, "ok")
	otherAttempt.AttemptID = "att-2"
	for name, p := range map[string]idem.FinishParams{"fence": staleFence, "attempt": otherAttempt} {
		if _, err := s.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
			t.Errorf("finish with wrong %s: %v, want ErrFenced", name, err)
		}
	}
	if got := mustGet(t, s, "order-1"); got.State != idem.StateInProgress || got.Result != nil {
		t.Fatalf("a fenced finish wrote: %+v", got)
	}

	p := finishParams(r, idem.StateSucceeded, "ok")
	done := mustFinish(t, s, p)
	if done.State != idem.StateSucceeded || string(done.Result) != "ok" ||
		!done.CompletedAt.Equal(p.CompletedAt) || !done.ExpiresAt.Equal(p.ExpiresAt) || done.Fence != 1 {
		t.Fatalf("finished record = %+v", done)
	}
	// Retry after a lost answer: same outcome succeeds without a write.
	if again := mustFinish(t, s, p); !equalRecord(*again, *done) {
		t.Fatalf("retried finish = %+v, want %+v", again, done)
	}
	// A different outcome for the same attempt is refused.
	if _, err := s.Finish(ctx, finishParams(r, idem.StateFailed, "no")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("second, different outcome: %v, want ErrFenced", err)
	}
	if _, err := s.Finish(ctx, finishParams(r, idem.StateSucceeded, "other")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("same state, other result: %v, want ErrFenced", err)
	}
}

func TestFinishUnknownThenLateTruth(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record

	unk := mustFinish(t, s, finishParams(r, idem.StateUnknown, ""))
	if unk.State != idem.StateUnknown || unk.Fence != r.Fence || !unk.ExpiresAt.IsZero() || unk.CompletedAt.IsZero() {
		t.Fatalf("unknown record = %+v, want same fence, no expiry, completed set", unk)
	}
	mustFinish(t, s, finishParams(r, idem.StateUnknown, "")) // retried mark: accepted
	late := mustFinish(t, s, finishParams(r, idem.StateSucceeded, "ok"))
	if late.State != idem.StateSucceeded || late.Fence != r.Fence {
		t.Fatalf("late truth = %+v", late)
	}
	if _, err := s.Finish(ctx, finishParams(r, idem.StateUnknown, "")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("unknown over succeeded: %v, want ErrFenced", err)
	}
	if _, err := s.Finish(ctx, finishParams(r, idem.State("bogus"), "")); err == nil || errors.Is(err, idem.ErrFenced) {
		t.Fatalf("bogus state: %v, want a parameter error", err)
	}
}

func TestFinishAbsentIsFenced(t *testing.T) {
	s := newStore(t)
	r := idem.Record{Scope: "tenant-a", Key: "gone", Fence: 1, AttemptID: "a"}
	if _, err := s.Finish(context.Background(), finishParams(r, idem.StateSucceeded, "x")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish of absent record: %v, want ErrFenced", err)
	}
}

func TestReleaseRules(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	rel := idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID}

	wrong := rel
	wrong.AttemptID = "att-2"
	if err := s.Release(ctx, wrong); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release by another attempt: %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, rel); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := s.Get(ctx, r.Scope, r.Key); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("get after release: %v, want ErrNotFound", err)
	}
	if err := s.Release(ctx, rel); err != nil {
		t.Fatalf("retried release of an absent record: %v, want nil", err)
	}

	// Unknown may be released; terminal may not.
	r = mustClaim(t, s, claimParams("order-2", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateUnknown, ""))
	if err := s.Release(ctx, idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID}); err != nil {
		t.Fatalf("release of unknown: %v", err)
	}
	r = mustClaim(t, s, claimParams("order-3", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateSucceeded, "ok"))
	if err := s.Release(ctx, idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release of succeeded: %v, want ErrFenced", err)
	}
	if got := mustGet(t, s, "order-3"); got.State != idem.StateSucceeded {
		t.Fatalf("refused release changed the record: %+v", got)
	}
}

func TestHeartbeat(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	hb := idem.HeartbeatParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID, LeaseUntil: t0.Add(time.Hour)}
	if err := s.Heartbeat(ctx, hb); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if got := mustGet(t, s, "order-1"); !got.LeaseUntil.Equal(hb.LeaseUntil) {
		t.Fatalf("lease = %v, want %v", got.LeaseUntil, hb.LeaseUntil)
	}
	stale := hb
	stale.Fence, stale.LeaseUntil = 7, t0.Add(2*time.Hour)
	if err := s.Heartbeat(ctx, stale); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat with wrong fence: %v, want ErrFenced", err)
	}
	mustFinish(t, s, finishParams(r, idem.StateUnknown, ""))
	if err := s.Heartbeat(ctx, hb); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat of unknown: %v, want ErrFenced", err)
	}
	if got := mustGet(t, s, "order-1"); !got.LeaseUntil.Equal(hb.LeaseUntil) {
		t.Fatalf("fenced heartbeat moved the lease to %v", got.LeaseUntil)
	}
}

func TestResolve(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateUnknown, ""))

	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: "nope", To: idem.StateFailed}); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("resolve absent: %v, want ErrNotFound", err)
	}
	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, Fence: 9, To: idem.StateFailed}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("resolve wrong fence: %v, want ErrFenced", err)
	}
	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, From: []idem.State{idem.StateSucceeded}, To: idem.StateFailed}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("resolve from wrong state: %v, want ErrFenced", err)
	}
	got, err := s.Resolve(ctx, idem.ResolveParams{
		Scope: r.Scope, Key: r.Key, Fence: r.Fence, To: idem.StateSucceeded, AttemptID: "recon-1",
		Result: []byte("found"), Now: t0.Add(time.Minute), ExpiresAt: t0.Add(2 * time.Hour),
	})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if got.State != idem.StateSucceeded || got.Fence != r.Fence+1 || got.AttemptID != "recon-1" ||
		string(got.Result) != "found" || !got.CompletedAt.Equal(t0.Add(time.Minute)) || !got.ExpiresAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("resolved = %+v", got)
	}
	// The original holder's late write is now refused.
	if _, err := s.Finish(ctx, finishParams(r, idem.StateFailed, "late")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("late finish after resolve: %v, want ErrFenced", err)
	}
}

func TestResolveRedriveAndRelease(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateUnknown, "partial"))
	re, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, To: idem.StateInProgress,
		AttemptID: "att-2", Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatalf("re-drive: %v", err)
	}
	if re.State != idem.StateInProgress || re.Fence != 2 || re.Result != nil || !re.CompletedAt.IsZero() ||
		!re.LeaseUntil.Equal(t0.Add(2*time.Minute)) || re.AttemptID != "att-2" {
		t.Fatalf("re-driven record = %+v", re)
	}
	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, From: []idem.State{idem.StateInProgress},
		Fence: 2, Release: true}); err != nil {
		t.Fatalf("resolve release: %v", err)
	}
	if _, err := s.Get(ctx, r.Scope, r.Key); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after resolve release: %v, want ErrNotFound", err)
	}
	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, To: idem.StateUnknown}); err == nil {
		t.Fatal("resolve to unknown accepted")
	}
}

func TestSetMark(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	done := mustFinish(t, s, finishParams(r, idem.StateSucceeded, "ok"))
	if err := s.SetMark(ctx, r.Scope, r.Key, r.Fence, idem.MarkReconciled); err != nil {
		t.Fatalf("set mark: %v", err)
	}
	got := mustGet(t, s, r.Key)
	want := *done
	want.Mark = idem.MarkReconciled
	if !equalRecord(*got, want) {
		t.Fatalf("after mark\n got %+v\nwant %+v", got, want)
	}
	if err := s.SetMark(ctx, r.Scope, r.Key, r.Fence+1, idem.MarkDrift); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("mark with wrong fence: %v, want ErrFenced", err)
	}
	if err := s.SetMark(ctx, r.Scope, "nope", 1, idem.MarkDrift); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("mark absent: %v, want ErrNotFound", err)
	}
}
