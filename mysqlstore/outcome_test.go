package mysqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestFinishRecordsOutcomeOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	p := succeed("k", "a1", 1, "result-1", t0.Add(time.Second))
	rec, err := f.st.Finish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.st.Get(ctx, "tenant-1", "k")
	if rec.State != idem.StateSucceeded || string(got.Result) != "result-1" || !got.CompletedAt.Equal(p.CompletedAt) || !got.ExpiresAt.Equal(p.ExpiresAt) {
		t.Fatalf("after Finish: returned %+v, stored %+v", rec, got)
	}
	if !reflect.DeepEqual(rec, got) {
		t.Fatalf("returned %+v differs from stored %+v", rec, got)
	}
	// A retried write with the same outcome succeeds.
	if _, err := f.st.Finish(ctx, p); err != nil {
		t.Fatalf("retried Finish: %v", err)
	}
	for name, bad := range map[string]idem.FinishParams{
		"other result":  succeed("k", "a1", 1, "result-2", t0),
		"other state":   func() idem.FinishParams { q := p; q.State = idem.StateFailed; return q }(),
		"to unknown":    func() idem.FinishParams { q := p; q.State = idem.StateUnknown; return q }(),
		"stale fence":   succeed("k", "a1", 2, "result-1", t0),
		"other attempt": succeed("k", "a2", 1, "result-1", t0),
		"absent":        succeed("nope", "a1", 1, "result-1", t0),
	} {
		if _, err := f.st.Finish(ctx, bad); !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s: err = %v, want ErrFenced", name, err)
		}
	}
	after, _ := f.st.Get(ctx, "tenant-1", "k")
	if string(after.Result) != "result-1" || after.State != idem.StateSucceeded {
		t.Fatalf("a refused Finish changed the record: %+v", after)
	}
}

func TestFinishUnknownThenLateTruth(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	unk := idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}
	rec, err := f.st.Finish(ctx, unk)
	if err != nil || rec.State != idem.StateUnknown || rec.Fence != 1 || !rec.ExpiresAt.IsZero() {
		t.Fatalf("Finish unknown = %+v, %v; want unknown at fence 1, no expiry", rec, err)
	}
	if _, err := f.st.Finish(ctx, unk); err != nil {
		t.Fatalf("retried Finish unknown: %v", err)
	}
	late := succeed("k", "a1", 1, "late", t0.Add(time.Minute))
	if rec, err = f.st.Finish(ctx, late); err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("late truth = %+v, %v; want accepted", rec, err)
	}
	if _, err := f.st.Finish(ctx, unk); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("unknown over succeeded: err = %v, want ErrFenced", err)
	}
}

func TestFinishRejectsBadState(t *testing.T) {
	f := newFixture(t)
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	p := succeed("k", "a1", 1, "x", t0)
	p.State = idem.StateInProgress
	if _, err := f.st.Finish(context.Background(), p); err == nil || errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish to in_progress: err = %v, want a validation error", err)
	}
}

func TestReleaseDeletesOnlyOwnClaim(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	rel := idem.ReleaseParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1"}
	for name, bad := range map[string]idem.ReleaseParams{
		"stale fence":   {Scope: "tenant-1", Key: "k", Fence: 2, AttemptID: "a1"},
		"other attempt": {Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a2"},
	} {
		if err := f.st.Release(ctx, bad); !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s: err = %v, want ErrFenced", name, err)
		}
	}
	if err := f.st.Release(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Get(ctx, "tenant-1", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after Release Get err = %v, want ErrNotFound", err)
	}
	if err := f.st.Release(ctx, rel); err != nil {
		t.Fatalf("retried Release of an absent record: %v", err)
	}
	if res := mustClaim(t, f.st, claimParams("k", "a2", t0)); !res.Claimed || res.Record.Fence != 1 {
		t.Fatalf("claim after release = %+v", res)
	}
}

func TestReleaseUnknownAndRefuseTerminal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("u", "a1", t0))
	if _, err := f.st.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "u", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "u", Fence: 1, AttemptID: "a1"}); err != nil {
		t.Fatalf("release unknown: %v", err)
	}
	mustClaim(t, f.st, claimParams("s", "a1", t0))
	if _, err := f.st.Finish(ctx, succeed("s", "a1", 1, "ok", t0)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "s", Fence: 1, AttemptID: "a1"}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release succeeded record: err = %v, want ErrFenced", err)
	}
}

func TestHeartbeat(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	hb := idem.HeartbeatParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", LeaseUntil: t0.Add(time.Hour)}
	if err := f.st.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	got, _ := f.st.Get(ctx, "tenant-1", "k")
	if !got.LeaseUntil.Equal(hb.LeaseUntil) {
		t.Fatalf("LeaseUntil = %v, want %v", got.LeaseUntil, hb.LeaseUntil)
	}
	// The same heartbeat again changes no row; MySQL reports 0 affected
	// rows, which must not be mistaken for a lost fence.
	if err := f.st.Heartbeat(ctx, hb); err != nil {
		t.Fatalf("repeated heartbeat: %v", err)
	}
	for name, bad := range map[string]idem.HeartbeatParams{
		"stale fence":   {Scope: "tenant-1", Key: "k", Fence: 2, AttemptID: "a1", LeaseUntil: t0},
		"other attempt": {Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a2", LeaseUntil: t0},
		"absent":        {Scope: "tenant-1", Key: "x", Fence: 1, AttemptID: "a1", LeaseUntil: t0},
	} {
		if err := f.st.Heartbeat(ctx, bad); !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s: err = %v, want ErrFenced", name, err)
		}
	}
	if _, err := f.st.Finish(ctx, succeed("k", "a1", 1, "ok", t0)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Heartbeat(ctx, hb); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat on a finished record: err = %v, want ErrFenced", err)
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	if _, err := f.st.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "k", Fence: 7, To: idem.StateSucceeded}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("wrong fence: err = %v, want ErrFenced", err)
	}
	if _, err := f.st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "k", From: []idem.State{idem.StateInProgress}, To: idem.StateSucceeded}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("wrong from: err = %v, want ErrFenced", err)
	}
	if _, err := f.st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "none", To: idem.StateSucceeded}); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("absent: err = %v, want ErrNotFound", err)
	}
	// Re-drive under a new fence.
	redrive := idem.ResolveParams{Scope: "tenant-1", Key: "k", Fence: 1, To: idem.StateInProgress, AttemptID: "a2", Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute)}
	rec, err := f.st.Resolve(ctx, redrive)
	if err != nil || rec.State != idem.StateInProgress || rec.Fence != 2 || rec.AttemptID != "a2" || !rec.CompletedAt.IsZero() {
		t.Fatalf("re-drive = %+v, %v", rec, err)
	}
	got, _ := f.st.Get(ctx, "tenant-1", "k")
	if got.Fence != 2 || !got.LeaseUntil.Equal(redrive.LeaseUntil) || !got.CompletedAt.IsZero() {
		t.Fatalf("stored after re-drive: %+v", got)
	}
	// The old attempt's late write is now refused.
	if _, err := f.st.Finish(ctx, succeed("k", "a1", 1, "late", t0)); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("late write after re-drive: err = %v, want ErrFenced", err)
	}
	// Operator resolves the in-flight re-drive to failed.
	fail := idem.ResolveParams{Scope: "tenant-1", Key: "k", From: []idem.State{idem.StateInProgress}, To: idem.StateFailed, AttemptID: "op", Result: []byte("declined"), Now: t0.Add(time.Hour), ExpiresAt: t0.Add(48 * time.Hour)}
	rec, err = f.st.Resolve(ctx, fail)
	if err != nil || rec.State != idem.StateFailed || rec.Fence != 3 || string(rec.Result) != "declined" || !rec.ExpiresAt.Equal(fail.ExpiresAt) {
		t.Fatalf("resolve to failed = %+v, %v", rec, err)
	}
	got, _ = f.st.Get(ctx, "tenant-1", "k")
	if got.Fence != 3 || got.State != idem.StateFailed || !got.CompletedAt.Equal(fail.Now) {
		t.Fatalf("stored after resolve: %+v", got)
	}
	if _, err := f.st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "k", From: []idem.State{idem.StateFailed}, Release: true}); err != nil {
		t.Fatalf("resolve release: %v", err)
	}
	if _, err := f.st.Get(ctx, "tenant-1", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after resolve release: %v", err)
	}
}

func TestSetMark(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k", "a1", t0))
	if err := f.st.SetMark(ctx, "tenant-1", "k", 1, idem.MarkDrift); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetMark(ctx, "tenant-1", "k", 1, idem.MarkDrift); err != nil {
		t.Fatalf("same mark again: %v", err)
	}
	if got, _ := f.st.Get(ctx, "tenant-1", "k"); got.Mark != idem.MarkDrift || got.State != idem.StateInProgress {
		t.Fatalf("after SetMark: %+v", got)
	}
	if err := f.st.SetMark(ctx, "tenant-1", "k", 2, idem.MarkReconciled); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stale fence: err = %v, want ErrFenced", err)
	}
	if err := f.st.SetMark(ctx, "tenant-1", "x", 1, idem.MarkReconciled); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("absent: err = %v, want ErrNotFound", err)
	}
}
