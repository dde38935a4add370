package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
)

// forBackends runs fn once per deployment kind (standalone, cluster).
func forBackends(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.client(t))
		})
	}
}

func TestClaimLifecycle(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		p := claimP("k1", "att-1", t0)
		first := mustClaim(t, s, p)
		if !first.Claimed || first.Record.Fence != 1 || first.Record.State != idem.StateInProgress {
			t.Fatalf("first claim = %+v, want claimed fence 1 in_progress", first)
		}
		// A duplicate with another attempt gets the existing record.
		dup := mustClaim(t, s, claimP("k1", "att-2", t0.Add(time.Second)))
		if dup.Claimed || dup.Record.AttemptID != "att-1" || dup.Record.Fence != 1 {
			t.Fatalf("duplicate = %+v, want unclaimed record of att-1", dup)
		}
		// The same attempt retried after a lost answer owns its record.
		again := mustClaim(t, s, p)
		if !again.Claimed || again.Record.Fence != 1 {
			t.Fatalf("retried claim = %+v, want claimed fence 1", again)
		}
		got, err := s.Get(ctx, "tenant-a", "k1")
		if err != nil {
			t.Fatal(err)
		}
		want := first.Record
		if fmt.Sprint(*got) != fmt.Sprint(want) {
			t.Fatalf("Get = %+v\nwant  %+v", *got, want)
		}
		if _, err := s.Get(ctx, "tenant-a", "absent"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Get(absent) = %v, want ErrNotFound", err)
		}
	})
}

func TestClaimReplacesOnlyExpiredTerminal(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		r := mustClaim(t, s, claimP("k", "a1", t0)).Record
		if _, err := s.Finish(ctx, finishP(r, idem.StateSucceeded, "ok", t0)); err != nil {
			t.Fatal(err)
		}
		// One microsecond before ExpiresAt: still a replay.
		early := mustClaim(t, s, claimP("k", "a2", t0.Add(time.Hour-time.Microsecond)))
		if early.Claimed || early.Record.State != idem.StateSucceeded || string(early.Record.Result) != "ok" {
			t.Fatalf("claim before expiry = %+v, want replay of succeeded", early)
		}
		late := mustClaim(t, s, claimP("k", "a3", t0.Add(time.Hour)))
		if !late.Claimed || late.Record.Fence != 2 || late.Record.State != idem.StateInProgress {
			t.Fatalf("claim at expiry = %+v, want claimed with fence 2", late)
		}
		got, _ := s.Get(ctx, "tenant-a", "k")
		if got.Fence != 2 || got.Result != nil || !got.ExpiresAt.IsZero() || !got.CompletedAt.IsZero() {
			t.Fatalf("re-claimed record = %+v, want fresh in_progress with fence 2", got)
		}
		if ttl := c.PTTL(ctx, s.recKey("tenant-a", "k")).Val(); ttl != -1 {
			t.Fatalf("re-claimed record has TTL %v, want none", ttl)
		}
		// unknown never expires, even long after.
		r2 := mustClaim(t, s, claimP("u", "a1", t0)).Record
		if _, err := s.Finish(ctx, finishP(r2, idem.StateUnknown, "", t0)); err != nil {
			t.Fatal(err)
		}
		if res := mustClaim(t, s, claimP("u", "a2", t0.Add(1000*time.Hour))); res.Claimed {
			t.Fatalf("claimed over an unknown record: %+v", res)
		}
	})
}

func TestFinish(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{ExpiryGrace: time.Minute})
		now := time.Now().UTC().Truncate(time.Microsecond)
		r := mustClaim(t, s, claimP("k", "a1", now)).Record

		stale := finishP(r, idem.StateSucceeded, "v", now)
		stale.Fence = 2
		if _, err := s.Finish(ctx, stale); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("finish with wrong fence = %v, want ErrFenced", err)
		}
		other := finishP(r, idem.StateSucceeded, "v", now)
		other.AttemptID = "intruder"
		if _, err := s.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("finish with wrong attempt = %v, want ErrFenced", err)
		}
		fp := finishP(r, idem.StateSucceeded, "v", now)
		got, err := s.Finish(ctx, fp)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idem.StateSucceeded || string(got.Result) != "v" || !got.ExpiresAt.Equal(fp.ExpiresAt) || !got.CompletedAt.Equal(now) {
			t.Fatalf("finished = %+v", got)
		}
		// The key expires at ExpiresAt + grace, not before.
		pttl := c.PTTL(ctx, s.recKey("tenant-a", "k")).Val()
		if pttl < time.Hour || pttl > time.Hour+2*time.Minute {
			t.Fatalf("PTTL = %v, want about 1h + 1m grace", pttl)
		}
		if _, err := s.Finish(ctx, fp); err != nil {
			t.Fatalf("retried identical finish = %v, want success", err)
		}
		diff := finishP(r, idem.StateFailed, "boom", now)
		if _, err := s.Finish(ctx, diff); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("second, different outcome = %v, want ErrFenced", err)
		}
		if _, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", now)); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("unknown after succeeded = %v, want ErrFenced", err)
		}
		if _, err := s.Finish(ctx, finishP(idem.Record{Scope: "tenant-a", Key: "absent", Fence: 1, AttemptID: "x"}, idem.StateSucceeded, "", now)); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("finish absent = %v, want ErrFenced", err)
		}
		if _, err := s.Finish(ctx, finishP(r, idem.StateInProgress, "", now)); err == nil || errors.Is(err, idem.ErrFenced) {
			t.Fatalf("finish to in_progress = %v, want a validation error", err)
		}
	})
}

func TestFinishUnknownThenLateTruth(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		r := mustClaim(t, s, claimP("k", "a1", t0)).Record
		u, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", t0))
		if err != nil {
			t.Fatal(err)
		}
		if u.State != idem.StateUnknown || u.Fence != 1 || !u.ExpiresAt.IsZero() {
			t.Fatalf("unknown = %+v, want unknown, same fence, no expiry", u)
		}
		if ttl := c.PTTL(ctx, s.recKey("tenant-a", "k")).Val(); ttl != -1 {
			t.Fatalf("unknown record has TTL %v, want none", ttl)
		}
		if _, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", t0)); err != nil {
			t.Fatalf("retried unknown = %v, want success", err)
		}
		late, err := s.Finish(ctx, finishP(r, idem.StateFailed, "late", t0.Add(time.Second)))
		if err != nil {
			t.Fatalf("late truth over unknown = %v, want accepted", err)
		}
		if late.State != idem.StateFailed || late.Fence != 1 {
			t.Fatalf("late = %+v", late)
		}
	})
}

func TestReleaseAndHeartbeat(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		r := mustClaim(t, s, claimP("k", "a1", t0)).Record
		hb := idem.HeartbeatParams{Scope: r.Scope, Key: r.Key, Fence: 1, AttemptID: "a1", LeaseUntil: t0.Add(time.Hour)}
		if err := s.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, r.Scope, r.Key); !got.LeaseUntil.Equal(hb.LeaseUntil) {
			t.Fatalf("lease = %v, want %v", got.LeaseUntil, hb.LeaseUntil)
		}
		bad := hb
		bad.AttemptID = "other"
		if err := s.Heartbeat(ctx, bad); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("heartbeat wrong attempt = %v, want ErrFenced", err)
		}
		rel := idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: 2, AttemptID: "a1"}
		if err := s.Release(ctx, rel); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("release wrong fence = %v, want ErrFenced", err)
		}
		rel.Fence = 1
		if err := s.Release(ctx, rel); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, rel); err != nil {
			t.Fatalf("retried release = %v, want success", err)
		}
		if err := s.Heartbeat(ctx, hb); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("heartbeat after release = %v, want ErrFenced", err)
		}
		again := mustClaim(t, s, claimP("k", "a2", t0))
		if !again.Claimed || again.Record.Fence != 1 {
			t.Fatalf("claim after release = %+v, want claimed", again)
		}
		if _, err := s.Finish(ctx, finishP(again.Record, idem.StateSucceeded, "v", t0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: 1, AttemptID: "a2"}); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("release of succeeded = %v, want ErrFenced", err)
		}
	})
}

func TestResolveAndMark(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: "tenant-a", Key: "none", To: idem.StateSucceeded}); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("resolve absent = %v, want ErrNotFound", err)
		}
		r := mustClaim(t, s, claimP("k", "a1", t0)).Record
		rp := idem.ResolveParams{Scope: r.Scope, Key: r.Key, To: idem.StateSucceeded, AttemptID: "op", Result: []byte("fixed"), Now: t0, ExpiresAt: t0.Add(time.Hour)}
		if _, err := s.Resolve(ctx, rp); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("resolve in_progress with From=unknown = %v, want ErrFenced", err)
		}
		if _, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", t0)); err != nil {
			t.Fatal(err)
		}
		rp.Fence = 7
		if _, err := s.Resolve(ctx, rp); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("resolve wrong fence = %v, want ErrFenced", err)
		}
		rp.Fence = 1
		got, err := s.Resolve(ctx, rp)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idem.StateSucceeded || got.Fence != 2 || got.AttemptID != "op" || string(got.Result) != "fixed" {
			t.Fatalf("resolved = %+v", got)
		}
		// The original holder's late write is now refused.
		if _, err := s.Finish(ctx, finishP(r, idem.StateFailed, "late", t0)); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("late finish after resolve = %v, want ErrFenced", err)
		}
		if err := s.SetMark(ctx, r.Scope, r.Key, 1, idem.MarkReconciled); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("mark old fence = %v, want ErrFenced", err)
		}
		if err := s.SetMark(ctx, r.Scope, r.Key, 2, idem.MarkDrift); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMark(ctx, r.Scope, "none", 1, idem.MarkDrift); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("mark absent = %v, want ErrNotFound", err)
		}
		after, _ := s.Get(ctx, r.Scope, r.Key)
		if after.Mark != idem.MarkDrift || after.State != idem.StateSucceeded || after.Fence != 2 {
			t.Fatalf("after mark = %+v", after)
		}
		// Re-drive from succeeded, then release.
		redrive, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, From: []idem.State{idem.StateSucceeded}, To: idem.StateInProgress, AttemptID: "re", Now: t0, LeaseUntil: t0.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if redrive.State != idem.StateInProgress || redrive.Fence != 3 || redrive.Result != nil || !redrive.CompletedAt.IsZero() || !redrive.ExpiresAt.IsZero() {
			t.Fatalf("re-drive = %+v", redrive)
		}
		if ttl := c.PTTL(ctx, s.recKey(r.Scope, r.Key)).Val(); ttl != -1 {
			t.Fatalf("re-driven record has TTL %v, want none", ttl)
		}
		if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, From: []idem.State{idem.StateInProgress}, Release: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, r.Scope, r.Key); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("after resolve release: %v, want ErrNotFound", err)
		}
	})
}

func TestListAndSweep(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		// 12 records, created one second apart, spread over two scopes.
		for i := range 12 {
			p := claimP(fmt.Sprintf("k%02d", i), "a", t0.Add(time.Duration(i)*time.Second))
			if i%3 == 0 {
				p.Scope = "tenant-b"
			}
			r := mustClaim(t, s, p).Record
			switch i % 4 {
			case 1:
				fp := finishP(r, idem.StateSucceeded, "v", p.Now)
				fp.ExpiresAt = t0.Add(time.Minute) // expired at t0+1m
				if _, err := s.Finish(ctx, fp); err != nil {
					t.Fatal(err)
				}
			case 2:
				if _, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", p.Now)); err != nil {
					t.Fatal(err)
				}
			}
		}
		all, err := s.List(ctx, idem.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 12 {
			t.Fatalf("List = %d records, want 12", len(all))
		}
		for i := 1; i < len(all); i++ {
			if !all[i-1].CreatedAt.Before(all[i].CreatedAt) {
				t.Fatalf("List not ordered by CreatedAt at %d", i)
			}
		}
		page, _ := s.List(ctx, idem.ListFilter{Limit: 5, After: &idem.Cursor{CreatedAt: all[3].CreatedAt, Scope: all[3].Scope, Key: all[3].Key}})
		if len(page) != 5 || page[0].Key != all[4].Key || page[4].Key != all[8].Key {
			t.Fatalf("page after k03 = %v", keysOf(page))
		}
		b, _ := s.List(ctx, idem.ListFilter{Scope: "tenant-b"})
		if len(b) != 4 {
			t.Fatalf("scope filter = %v, want 4", keysOf(b))
		}
		unk, _ := s.List(ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown}, CreatedBefore: t0.Add(7 * time.Second)})
		if got := keysOf(unk); fmt.Sprint(got) != "[k02 k06]" {
			t.Fatalf("unknown before 7s = %v, want [k02 k06]", got)
		}
		// Nothing is expired yet at t0.
		if n, err := s.Sweep(ctx, idem.SweepParams{Now: t0, Limit: 100}); err != nil || n != 0 {
			t.Fatalf("early sweep = %d, %v; want 0", n, err)
		}
		if n, err := s.Sweep(ctx, idem.SweepParams{Now: t0.Add(time.Minute), Limit: 2}); err != nil || n != 2 {
			t.Fatalf("limited sweep = %d, %v; want 2", n, err)
		}
		if n, err := s.Sweep(ctx, idem.SweepParams{Now: t0.Add(time.Minute), Limit: 100}); err != nil || n != 1 {
			t.Fatalf("second sweep = %d, %v; want 1", n, err)
		}
		left, _ := s.List(ctx, idem.ListFilter{})
		for _, r := range left {
			if r.State.Terminal() {
				t.Fatalf("sweep left expired %s", r.Key)
			}
		}
		if len(left) != 9 {
			t.Fatalf("after sweep %d records, want 9 (in_progress and unknown kept)", len(left))
		}
	})
}

func keysOf(rs []idem.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	return out
}

func TestSweepSparesReclaimed(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		r := mustClaim(t, s, claimP("k", "a1", t0)).Record
		if _, err := s.Finish(ctx, finishP(r, idem.StateSucceeded, "v", t0)); err != nil {
			t.Fatal(err)
		}
		// Expired and re-claimed before the sweeper's script runs.
		if !mustClaim(t, s, claimP("k", "a2", t0.Add(2*time.Hour))).Claimed {
			t.Fatal("re-claim failed")
		}
		n, err := sweepBatch(ctx, c, []string{s.recKey("tenant-a", "k")}, encTime(t0.Add(2*time.Hour)))
		if err != nil || n != 0 {
			t.Fatalf("sweep of re-claimed = %d, %v; want 0", n, err)
		}
	})
}

func TestConcurrentClaimOneWinner(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		s := newStoreOn(t, c, Config{})
		const n = 32
		var wg sync.WaitGroup
		wins := make(chan string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Claim(context.Background(), claimP("hot", fmt.Sprint("a", i), t0))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Claimed {
					wins <- res.Record.AttemptID
				}
			}()
		}
		wg.Wait()
		close(wins)
		if len(wins) != 1 {
			t.Fatalf("%d claimers won, want exactly 1", len(wins))
		}
	})
}

func TestTagsNeverCollide(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		s := newStoreOn(t, c, Config{})
		pairs := [][2]string{{"a:b", "c"}, {"a", "b:c"}, {"a%3Ab", "c"}, {"{x}", "}y{"}, {"", "a:b:c"}}
		for _, pr := range pairs {
			p := claimP(pr[1], "att", t0)
			p.Scope = pr[0]
			if res := mustClaim(t, s, p); !res.Claimed || res.Record.Scope != pr[0] || res.Record.Key != pr[1] {
				t.Fatalf("pair %q collided: %+v", pr, res)
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				rec := s.recKey(pr[0], pr[1])
				a, b := cc.ClusterKeySlot(context.Background(), rec).Val(), cc.ClusterKeySlot(context.Background(), chanKey(rec)).Val()
				if a != b {
					t.Fatalf("record and channel of %q in slots %d and %d", pr, a, b)
				}
			}
		}
		all, _ := s.List(context.Background(), idem.ListFilter{})
		if len(all) != len(pairs) {
			t.Fatalf("List = %d records, want %d", len(all), len(pairs))
		}
	})
}

func TestClosed(t *testing.T) {
	s := newStoreOn(t, standaloneClient(t), Config{})
	s.Close()
	ctx := context.Background()
	if _, err := s.Claim(ctx, claimP("k", "a", t0)); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Claim after Close = %v", err)
	}
	if _, err := s.Get(ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if _, _, err := s.Subscribe(ctx, "s", "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Subscribe after Close = %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, cfg := range []Config{
		{Prefix: "bad{prefix"},
		{Prefix: "glob*"},
		{PollFallback: -1, PubSub: PubSubOff},
		{Wait: &WaitConfig{}, PubSub: PubSubOff},
		{Wait: &WaitConfig{AOFLocal: 2}, PubSub: PubSubOff},
		{PubSub: 9},
	} {
		if _, err := New(c, cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want a validation error", cfg)
		}
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New(nil client) succeeded")
	}
}

func TestWaitConfig(t *testing.T) {
	c := standaloneClient(t)
	ctx := context.Background()
	// The test server has no replicas: WAIT 1 cannot be satisfied.
	s := newStoreOn(t, c, Config{Wait: &WaitConfig{Replicas: 1, Timeout: 50 * time.Millisecond}})
	_, err := s.Claim(ctx, claimP("k", "a1", t0))
	if !errors.Is(err, ErrNotDurable) || !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("claim without replicas = %v, want ErrNotDurable", err)
	}
	// No effect ran under the claim that was not confirmed: it is released.
	if _, err := s.Get(ctx, "tenant-a", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after a claim that was not confirmed = %v, want ErrNotFound", err)
	}
	if _, err := s.Claim(ctx, claimP("k", "a1", t0)); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("retried claim = %v, want ErrNotDurable again", err)
	}
	// A replay needs no durability wait.
	mustClaim(t, newStoreOn(t, c, Config{Prefix: s.prefix}), claimP("k", "a0", t0))
	if res, err := s.Claim(ctx, claimP("k", "a2", t0)); err != nil || res.Claimed {
		t.Fatalf("duplicate = %+v, %v; want unclaimed replay without error", res, err)
	}
	hasAOF, err := s.hasCommand(ctx, "waitaof")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(c, Config{Prefix: uniquePrefix(t), Wait: &WaitConfig{AOFLocal: 1}})
	if !hasAOF && err == nil {
		t.Fatal("New with WAITAOF on a server without it succeeded")
	}
}

// TestFinishClaimHint: with the caller's claim as a hint, Finish answers
// the record the store holds: built from the claim when the stored value
// still holds the claim's lease, created time and mark, read back when a
// heartbeat or a mark changed them since.
func TestFinishClaimHint(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		now := time.Now().UTC().Truncate(time.Microsecond)
		for i, change := range []string{"none", "heartbeat", "mark"} {
			cp := claimP(fmt.Sprint("hint-", i), "a1", now)
			cp.Intent = []byte(`{"x":1}`)
			claim := mustClaim(t, s, cp).Record
			switch change {
			case "heartbeat":
				if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: claim.Scope, Key: claim.Key, Fence: claim.Fence,
					AttemptID: claim.AttemptID, LeaseUntil: now.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			case "mark":
				if err := s.SetMark(ctx, claim.Scope, claim.Key, claim.Fence, idem.Mark("m")); err != nil {
					t.Fatal(err)
				}
			}
			fp := finishP(claim, idem.StateSucceeded, "v", now)
			fp.Claim = claim
			got, err := s.Finish(ctx, fp)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := s.Get(ctx, claim.Scope, claim.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, stored) {
				t.Fatalf("%s: Finish answered %+v\nstored %+v", change, got, stored)
			}
			if got2, err := s.Finish(ctx, fp); err != nil || !reflect.DeepEqual(got2, stored) {
				t.Fatalf("%s: retried Finish = %+v, %v", change, got2, err)
			}
		}
	})
}

// TestFinishComparesClaimOnce: Finish given its claim sends the claim's
// exact value, and the script takes the one-comparison path (answer 1)
// whenever the stored value is the claim (a first claim, a take-over of
// an expired record, a claim with a long intent or none), writing
// exactly the new value Finish built; after a heartbeat it does not.
func TestFinishComparesClaimOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		if err := c.ScriptLoad(ctx, finishLua(s.pubCmd)).Err(); err != nil {
			t.Fatal(err)
		}
		rd := c.(rawDoer)
		long := claimP("long", "a1", t0)
		long.Intent = make([]byte, 4000)
		none := claimP("none", "a1", t0.Add(time.Nanosecond)) // times off the microsecond
		none.Intent = nil
		old := claimP("old", "a1", t0)
		r := mustClaim(t, s, old).Record
		if _, err := s.Finish(ctx, finishP(r, idem.StateSucceeded, "v", t0)); err != nil {
			t.Fatal(err)
		}
		takeover := claimP("old", "a2", t0.Add(2*time.Hour))
		for _, cp := range []idem.ClaimParams{claimP("first", "a1", t0), long, none, takeover} {
			claim := mustClaim(t, s, cp).Record
			fp := finishP(claim, idem.StateFailed, "boom", t0.Add(time.Minute))
			fp.Claim = claim
			fc := s.newFinishCall(&fp)
			_, fast, done, err := fc.runRaw(ctx, s, rd)
			if err != nil || !done || !fast {
				t.Fatalf("%s (fence %d): runRaw = fast %v, done %v, %v; want the claim path", cp.Key, claim.Fence, fast, done, err)
			}
			if v := c.Get(ctx, fc.rec).Val(); v != string(fc.val) {
				t.Fatalf("%s: stored %q\nwant %q", cp.Key, v, fc.val)
			}
			want, _ := finishRecord(&fp, "", true)
			if got, err := s.Get(ctx, cp.Scope, cp.Key); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: stored %+v, %v\nbuilt %+v", cp.Key, got, err, want)
			}
			if ttl := c.PTTL(ctx, fc.rec).Val(); ttl <= 0 {
				t.Fatalf("%s: TTL %v after a terminal outcome", cp.Key, ttl)
			}
		}
		// A terminal outcome without ExpiresAt takes the same path and
		// leaves the key without a TTL.
		claim := mustClaim(t, s, claimP("forever", "a1", t0)).Record
		fp := finishP(claim, idem.StateSucceeded, "v", t0)
		fp.ExpiresAt, fp.Claim = time.Time{}, claim
		fc := s.newFinishCall(&fp)
		if _, fast, done, err := fc.runRaw(ctx, s, rd); err != nil || !done || !fast {
			t.Fatalf("no expiry: runRaw = fast %v, done %v, %v; want the claim path", fast, done, err)
		}
		if ttl := c.PTTL(ctx, fc.rec).Val(); ttl != -1 {
			t.Fatalf("no expiry: TTL %v, want none", ttl)
		}
		claim = mustClaim(t, s, claimP("beat", "a1", t0)).Record
		if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: claim.Scope, Key: claim.Key, Fence: claim.Fence,
			AttemptID: claim.AttemptID, LeaseUntil: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		fp = finishP(claim, idem.StateSucceeded, "v", t0)
		fp.Claim = claim
		if v, fast, done, err := s.newFinishCall(&fp).runRaw(ctx, s, rd); err != nil || !done || fast || v[:3] != "I1s" {
			t.Fatalf("after a heartbeat: runRaw = %.3q, fast %v, done %v, %v; want the stored value", v, fast, done, err)
		}
	})
}

// TestFinishNeverMatchesEmptyValue: without a claim, Finish's expected
// value is empty; a key holding an empty string is not a record, and is
// refused, not overwritten.
func TestFinishNeverMatchesEmptyValue(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		rec := s.recKey("tenant-a", "empty")
		if err := c.Set(ctx, rec, "", 0).Err(); err != nil {
			t.Fatal(err)
		}
		fp := finishP(idem.Record{Scope: "tenant-a", Key: "empty", Fence: 1, AttemptID: "a"}, idem.StateSucceeded, "v", t0)
		if _, err := s.Finish(ctx, fp); err == nil || errors.Is(err, idem.ErrFenced) {
			t.Errorf("Finish over an empty value = %v, want an error other than fenced", err)
		}
		if v, err := c.Get(ctx, rec).Result(); err != nil || v != "" {
			t.Errorf("the empty value became %q, %v", v, err)
		}
	})
}

// TestFinishPublishes: the finish script has the store's publish command
// built in; a subscriber is woken by a finish on either of its paths
// (the caller's claim compared once, or the decoding one) in each mode
// that publishes, and PubSubOff publishes nothing.
func TestFinishPublishes(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		for _, mode := range []PubSubMode{PubSubSharded, PubSubClassic, PubSubOff} {
			s := newStoreOn(t, c, Config{PubSub: mode, PollFallback: time.Hour})
			for _, withClaim := range []bool{true, false} {
				key := fmt.Sprint("pub-", mode, "-", withClaim)
				claim := mustClaim(t, s, claimP(key, "a1", t0)).Record
				ch, cancel, err := s.Subscribe(ctx, claim.Scope, claim.Key)
				if err != nil {
					t.Fatal(err)
				}
				fp := finishP(claim, idem.StateSucceeded, "v", t0)
				if withClaim {
					fp.Claim = claim
				}
				if _, err := s.Finish(ctx, fp); err != nil {
					t.Fatal(err)
				}
				wait := 5 * time.Second
				if mode == PubSubOff {
					wait = 200 * time.Millisecond
				}
				select {
				case <-ch:
					if mode == PubSubOff {
						t.Errorf("PubSubOff, claim %v: the subscriber was woken", withClaim)
					}
				case <-time.After(wait):
					if mode != PubSubOff {
						t.Errorf("mode %d, claim %v: the subscriber was not woken", mode, withClaim)
					}
				}
				cancel()
			}
		}
	})
}

// noRawClient hides DoRaw, as a client wrapped behind the
// UniversalClient interface does.
type noRawClient struct{ redis.UniversalClient }

// TestConformanceWithoutDoRaw runs the suite on a client without DoRaw:
// claims and finishes then go through go-redis's Do and Script.Run,
// whose replies (nil, 1, a value, a status word) are read the same way.
// Standalone only: a Cluster client behind the interface is not known for
// one, so List and Sweep would scan a single master.
func TestConformanceWithoutDoRaw(t *testing.T) {
	c := noRawClient{standaloneClient(t)}
	if _, ok := interface{}(c).(rawDoer); ok {
		t.Fatal("noRawClient has DoRaw")
	}
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return newStoreOn(t, c, Config{}) },
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			return newStoreOn(t, noRawClient{standaloneClient(t)}, Config{Prefix: st.(*Store).prefix})
		},
	})
}
