package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

func TestClaimNewAndDuplicate(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	p := claimParams("k1", "a1", t0)
	first := mustClaim(t, s, p)
	want := idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress, Fence: 1,
		AttemptID: "a1", Intent: p.Intent, CreatedAt: t0, LeaseUntil: p.LeaseUntil,
	}
	if !first.Claimed || !reflect.DeepEqual(first.Record, want) {
		t.Fatalf("first claim = %+v, want claimed %+v", first, want)
	}

	dup := claimParams("k1", "a2", t0.Add(time.Second))
	dup.Fingerprint = idem.NewFingerprint([]byte("other"))
	got := mustClaim(t, s, dup)
	if got.Claimed || !reflect.DeepEqual(got.Record, want) {
		t.Fatalf("duplicate claim = %+v, want unclaimed %+v", got, want)
	}

	// The caller's own claim, retried after a lost answer, is still its own.
	again := mustClaim(t, s, claimParams("k1", "a1", t0.Add(time.Second)))
	if !again.Claimed || again.Record.Fence != 1 {
		t.Fatalf("retried own claim = %+v, want claimed at fence 1", again)
	}
}

func TestClaimReplacesOnlyExpiredTerminal(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	c := mustClaim(t, s, claimParams("k", "a1", t0))
	mustFinish(t, s, succeed(c, "ok", t0.Add(time.Second), time.Hour))
	expiry := t0.Add(time.Second + time.Hour)

	before := mustClaim(t, s, claimParams("k", "a2", expiry.Add(-time.Microsecond)))
	if before.Claimed || before.Record.State != idem.StateSucceeded || string(before.Record.Result) != "ok" {
		t.Fatalf("claim before expiry = %+v, want the recorded success", before)
	}
	after := mustClaim(t, s, claimParams("k", "a3", expiry))
	r := after.Record
	if !after.Claimed || r.Fence != 2 || r.State != idem.StateInProgress || r.AttemptID != "a3" ||
		r.Result != nil || !r.CompletedAt.IsZero() || !r.ExpiresAt.IsZero() || !r.CreatedAt.Equal(expiry) {
		t.Fatalf("claim at expiry = %+v, want a fresh claim at fence 2", after)
	}
}

func TestClaimNeverReplacesUnknownOrInProgress(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("u", "a1", t0))
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "u", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, claimParams("p", "a1", t0))
	far := t0.Add(1000 * time.Hour)
	for _, k := range []string{"u", "p"} {
		if got := mustClaim(t, s, claimParams(k, "a9", far)); got.Claimed || got.Record.Fence != c.Record.Fence {
			t.Errorf("claim of %s long after = %+v, want unclaimed", k, got)
		}
	}
}

func TestFinish(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("k", "a1", t0))
	done := t0.Add(time.Second)

	for name, p := range map[string]idem.FinishParams{
		"wrong fence":   {Fence: 2, AttemptID: "a1"},
		"wrong attempt": {Fence: 1, AttemptID: "zz"},
	} {
		p.Scope, p.Key, p.State, p.CompletedAt, p.ExpiresAt = "tenant-1", "k", idem.StateSucceeded, done, done.Add(time.Hour)
		if _, err := s.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s: err = %v, want ErrFenced", name, err)
		}
	}

	p := succeed(c, "charged", done, time.Hour)
	rec := mustFinish(t, s, p)
	if rec.State != idem.StateSucceeded || string(rec.Result) != "charged" || !rec.CompletedAt.Equal(done) ||
		!rec.ExpiresAt.Equal(done.Add(time.Hour)) || rec.Fence != 1 {
		t.Fatalf("finished record = %+v", rec)
	}
	// A retried write that finds its own outcome succeeds without writing.
	if again := mustFinish(t, s, p); !reflect.DeepEqual(again, rec) {
		t.Fatalf("retried finish = %+v, want %+v", again, rec)
	}
	// Another outcome for the same attempt is refused.
	other := p
	other.State, other.Result = idem.StateFailed, []byte("boom")
	if _, err := s.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("second, different outcome: err = %v, want ErrFenced", err)
	}
	unknown := idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: done}
	if _, err := s.Finish(ctx, unknown); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("unknown after success: err = %v, want ErrFenced", err)
	}
	absent := p
	absent.Key = "absent"
	if _, err := s.Finish(ctx, absent); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish of absent record: err = %v, want ErrFenced", err)
	}
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "k", State: idem.StateInProgress}); err == nil {
		t.Fatal("finish to in_progress succeeded")
	}
}

func TestFinishUnknownThenLateTruth(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("k", "a1", t0))
	unknown := idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0.Add(time.Minute)}
	rec := mustFinish(t, s, unknown)
	if rec.State != idem.StateUnknown || rec.Fence != 1 || !rec.ExpiresAt.IsZero() || !rec.CompletedAt.Equal(unknown.CompletedAt) {
		t.Fatalf("unknown record = %+v", rec)
	}
	mustFinish(t, s, unknown) // retried: same outcome, accepted
	if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", LeaseUntil: t0.Add(time.Hour)}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat of unknown: err = %v, want ErrFenced", err)
	}
	late := mustFinish(t, s, succeed(c, "late", t0.Add(2*time.Minute), time.Hour))
	if late.State != idem.StateSucceeded || late.Fence != 1 {
		t.Fatalf("late truth = %+v, want succeeded at fence 1", late)
	}
}

func TestReleaseAndHeartbeat(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	mustClaim(t, s, claimParams("k", "a1", t0))
	hb := idem.HeartbeatParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", LeaseUntil: t0.Add(time.Hour)}
	if err := s.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Get(ctx, "tenant-1", "k"); !rec.LeaseUntil.Equal(hb.LeaseUntil) {
		t.Fatalf("lease after heartbeat = %v, want %v", rec.LeaseUntil, hb.LeaseUntil)
	}
	stale := hb
	stale.Fence = 7
	if err := s.Heartbeat(ctx, stale); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stale heartbeat: err = %v, want ErrFenced", err)
	}

	rel := idem.ReleaseParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "other"}
	if err := s.Release(ctx, rel); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release by another attempt: err = %v, want ErrFenced", err)
	}
	rel.AttemptID = "a1"
	if err := s.Release(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "tenant-1", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("get after release: err = %v, want ErrNotFound", err)
	}
	if err := s.Release(ctx, rel); err != nil {
		t.Fatalf("retried release of absent record: %v", err)
	}
	if c := mustClaim(t, s, claimParams("k", "a2", t0)); !c.Claimed || c.Record.Fence != 1 {
		t.Fatalf("claim after release = %+v", c)
	}

	c := mustClaim(t, s, claimParams("done", "a1", t0))
	mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
	if err := s.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "done", Fence: 1, AttemptID: "a1"}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release of terminal record: err = %v, want ErrFenced", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	mustClaim(t, s, claimParams("k", "a1", t0))
	mustFinish(t, s, idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0})

	base := idem.ResolveParams{Scope: "tenant-1", Key: "k", AttemptID: "op", Now: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour)}
	wrongFence := base
	wrongFence.Fence, wrongFence.To = 5, idem.StateSucceeded
	if _, err := s.Resolve(ctx, wrongFence); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("resolve at wrong fence: err = %v, want ErrFenced", err)
	}
	absent := base
	absent.Key, absent.To = "nope", idem.StateFailed
	if _, err := s.Resolve(ctx, absent); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("resolve absent: err = %v, want ErrNotFound", err)
	}

	redrive := base
	redrive.Fence, redrive.To, redrive.LeaseUntil = 1, idem.StateInProgress, t0.Add(90*time.Minute)
	rec, err := s.Resolve(ctx, redrive)
	if err != nil || rec.State != idem.StateInProgress || rec.Fence != 2 || rec.AttemptID != "op" ||
		!rec.LeaseUntil.Equal(redrive.LeaseUntil) || !rec.CompletedAt.IsZero() {
		t.Fatalf("re-drive = %+v, %v", rec, err)
	}
	// The first holder's late write is now refused.
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1", State: idem.StateSucceeded, CompletedAt: t0}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("late write after re-drive: err = %v, want ErrFenced", err)
	}

	toFailed := base
	toFailed.From, toFailed.To, toFailed.Result = []idem.State{idem.StateInProgress}, idem.StateFailed, []byte("declined")
	rec, err = s.Resolve(ctx, toFailed)
	if err != nil || rec.State != idem.StateFailed || rec.Fence != 3 || string(rec.Result) != "declined" ||
		!rec.ExpiresAt.Equal(base.ExpiresAt) || !rec.CompletedAt.Equal(base.Now) {
		t.Fatalf("resolve to failed = %+v, %v", rec, err)
	}
	release := base
	release.From, release.Release = []idem.State{idem.StateFailed}, true
	if _, err := s.Resolve(ctx, release); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "tenant-1", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("get after resolve-release: err = %v, want ErrNotFound", err)
	}
}

func TestSetMark(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("k", "a1", t0))
	mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
	if err := s.SetMark(ctx, "tenant-1", "k", 1, idem.MarkReconciled); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Get(ctx, "tenant-1", "k"); rec.Mark != idem.MarkReconciled || rec.State != idem.StateSucceeded {
		t.Fatalf("marked record = %+v", rec)
	}
	if err := s.SetMark(ctx, "tenant-1", "k", 2, idem.MarkDrift); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("mark at wrong fence: err = %v, want ErrFenced", err)
	}
	if err := s.SetMark(ctx, "tenant-1", "none", 1, idem.MarkDrift); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("mark of absent record: err = %v, want ErrNotFound", err)
	}
}

func TestListAndSweep(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	// Three records per second of creation time, in scopes b and a, so
	// ordering ties are broken by scope then key.
	for i, k := range []string{"k0", "k1", "k2", "k3", "k4", "k5"} {
		p := claimParams(k, "a", t0.Add(time.Duration(i/3)*time.Second))
		p.Scope = []string{"b", "a"}[i%2]
		c := mustClaim(t, s, p)
		if i < 4 {
			mustFinish(t, s, succeed(c, k, t0, time.Duration(i+1)*time.Hour))
		}
	}
	all, err := s.List(ctx, idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := listKeys(all); got != "a/k1 b/k0 b/k2 a/k3 a/k5 b/k4" {
		t.Fatalf("List order = %s", got)
	}
	page, _ := s.List(ctx, idem.ListFilter{Limit: 2, After: &idem.Cursor{CreatedAt: all[1].CreatedAt, Scope: all[1].Scope, Key: all[1].Key}})
	if got := listKeys(page); got != "b/k2 a/k3" {
		t.Fatalf("page after cursor = %s", got)
	}
	filtered, _ := s.List(ctx, idem.ListFilter{Scope: "a", States: []idem.State{idem.StateSucceeded}, CreatedBefore: t0.Add(time.Second)})
	if got := listKeys(filtered); got != "a/k1" {
		t.Fatalf("filtered list = %s", got)
	}

	// At t0+2h30m, k0 (1h) and k1 (2h) have expired; k2, k3 have not; k4, k5
	// are in progress.
	now := t0.Add(150 * time.Minute)
	n, err := s.Sweep(ctx, idem.SweepParams{Now: now, Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("Sweep limit 1 = %d, %v", n, err)
	}
	if n, _ = s.Sweep(ctx, idem.SweepParams{Now: now, Limit: 10}); n != 1 {
		t.Fatalf("second Sweep = %d, want 1", n)
	}
	if n, _ = s.Sweep(ctx, idem.SweepParams{Now: now.Add(1000 * time.Hour)}); n != 2 {
		t.Fatalf("unbounded Sweep = %d, want 2 (in_progress records stay)", n)
	}
	rest, _ := s.List(ctx, idem.ListFilter{})
	if got := listKeys(rest); got != "a/k5 b/k4" {
		t.Fatalf("after sweep = %s", got)
	}
}

func listKeys(rs []idem.Record) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.Scope + "/" + r.Key)
	}
	return b.String()
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	s.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := s.Claim(ctx, claimParams("k", "a", t0)); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Claim after Close: %v", err)
	}
	if _, err := s.Get(ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, _, err := s.Subscribe(ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

func TestBackendErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	// No migration: the table does not exist.
	s, err := pgstore.New(context.Background(), pool, pgstore.Config{Schema: freshSchema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Claim(context.Background(), claimParams("k", "a", t0))
	var se *idem.StoreError
	if !errors.As(err, &se) || se.Op != "claim" || !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("claim on a missing table: err = %v, want a StoreError", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := context.Background()
	long := string(bytes.Repeat([]byte("t"), 52))
	for field, cfg := range map[string]pgstore.Config{
		"Config.Table":  {Table: long},
		"Config.Schema": {Schema: long + long},
	} {
		_, err := pgstore.New(ctx, pool, cfg)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(field)) {
			t.Errorf("New(%s too long): err = %v, want one naming %s", field, err, field)
		}
	}
	if _, err := pgstore.New(ctx, nil, pgstore.Config{}); err == nil {
		t.Error("New with a nil pool succeeded")
	}
	s, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.Config(); c.Schema != "public" || c.Table != "idem_records" {
		t.Fatalf("defaults = %+v", c)
	}
}
