package redisstore

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// rawSubscribe subscribes to ch with the store's publish command, outside
// Store.Subscribe (so the record is not marked as awaited), and returns
// the messages.
func rawSubscribe(t *testing.T, c redis.UniversalClient, s *Store, ch string) <-chan *redis.Message {
	t.Helper()
	ctx := context.Background()
	var ps *redis.PubSub
	if s.pubCmd == "spublish" {
		ps = c.SSubscribe(ctx, ch)
	} else {
		ps = c.Subscribe(ctx, ch)
	}
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return ps.Channel()
}

// TestFinishPublishesOnlyWhenAwaited: a first-time finish publishes
// nothing for a record no subscriber marked, and publishes once
// Store.Subscribe has marked it — the saving must not cost a waiter its
// wake-up.
func TestFinishPublishesOnlyWhenAwaited(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		for _, mode := range []PubSubMode{PubSubSharded, PubSubClassic} {
			s := newStoreOn(t, c, Config{PubSub: mode, PollFallback: time.Hour})
			for _, awaited := range []bool{false, true} {
				claim := mustClaim(t, s, claimP(strings.Repeat("w", 1+len(s.pubCmd))+map[bool]string{true: "-awaited"}[awaited], "a1", t0)).Record
				msgs := rawSubscribe(t, c, s, chanKey(s.recKey(claim.Scope, claim.Key)))
				if awaited {
					_, cancel, err := s.Subscribe(ctx, claim.Scope, claim.Key)
					if err != nil {
						t.Fatal(err)
					}
					defer cancel()
				}
				fp := finishP(claim, idem.StateSucceeded, "v", t0)
				fp.Claim = claim
				if _, err := s.Finish(ctx, fp); err != nil {
					t.Fatal(err)
				}
				select {
				case m := <-msgs:
					if !awaited {
						t.Errorf("%s: a finish nobody awaited published %q", s.pubCmd, m.Payload)
					}
				case <-time.After(300 * time.Millisecond):
					if awaited {
						t.Errorf("%s: a finish of an awaited record did not publish", s.pubCmd)
					}
				}
				got, err := s.Get(ctx, claim.Scope, claim.Key)
				if err != nil || got.State != idem.StateSucceeded || string(got.Result) != "v" || !got.LeaseUntil.Equal(claim.LeaseUntil) {
					t.Fatalf("%s, awaited %v: recorded %+v, %v", s.pubCmd, awaited, got, err)
				}
			}
		}
	})
}

// TestAwaitedMark: the mark changes the stored bytes but not the record
// read back; a heartbeat keeps it; it touches only a live in_progress
// record, once.
func TestAwaitedMark(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{PollFallback: time.Hour})
		claim := mustClaim(t, s, claimP("marked", "a1", t0)).Record
		rec := s.recKey(claim.Scope, claim.Key)
		before, _ := c.Get(ctx, rec).Result()
		_, cancel, err := s.Subscribe(ctx, claim.Scope, claim.Key)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		marked, _ := c.Get(ctx, rec).Result()
		if marked == before || len(marked) != len(before)+1 {
			t.Fatalf("value after Subscribe:\n%q\nbefore:\n%q", marked, before)
		}
		got, err := s.Get(ctx, claim.Scope, claim.Key)
		if err != nil || !reflect.DeepEqual(*got, claim) {
			t.Fatalf("marked record reads as %+v, %v; want %+v", got, err, claim)
		}
		// Marking again changes nothing.
		if _, cancel, err := s.Subscribe(ctx, claim.Scope, claim.Key); err != nil {
			t.Fatal(err)
		} else {
			cancel()
		}
		if again, _ := c.Get(ctx, rec).Result(); again != marked {
			t.Fatalf("second mark rewrote the value:\n%q", again)
		}
		// A heartbeat moves the lease and keeps the mark.
		lease := t0.Add(time.Minute)
		if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: claim.Scope, Key: claim.Key, Fence: claim.Fence,
			AttemptID: claim.AttemptID, LeaseUntil: lease}); err != nil {
			t.Fatal(err)
		}
		beat, _ := c.Get(ctx, rec).Result()
		if !strings.Contains(beat, ";;0:0"+encTime(lease)+";") {
			t.Fatalf("heartbeat dropped the mark: %q", beat)
		}
		if got, err := s.Get(ctx, claim.Scope, claim.Key); err != nil || !got.LeaseUntil.Equal(utcMicro(lease)) {
			t.Fatalf("after the heartbeat: %+v, %v", got, err)
		}
		// The finish keeps the rest of an awaited value and records the outcome.
		fp := finishP(claim, idem.StateSucceeded, "ok", t0)
		fp.Claim = claim
		if _, err := s.Finish(ctx, fp); err != nil {
			t.Fatal(err)
		}
		done, _ := c.Get(ctx, rec).Result()
		// Terminal, absent: left as they are.
		for _, key := range []string{"marked", "absent"} {
			if _, cancel, err := s.Subscribe(ctx, claim.Scope, key); err != nil {
				t.Fatal(err)
			} else {
				cancel()
			}
		}
		if after, _ := c.Get(ctx, rec).Result(); after != done {
			t.Fatalf("Subscribe rewrote a terminal record:\n%q\nwas\n%q", after, done)
		}
		if n, _ := c.Exists(ctx, s.recKey(claim.Scope, "absent")).Result(); n != 0 {
			t.Fatal("Subscribe created a record")
		}
	})
}

// TestMarkedLeaseDecodes: the Go decoder reads a lease with the mark's
// leading zero as the same time.
func TestMarkedLeaseDecodes(t *testing.T) {
	p := claimP("k", "a", t0)
	v := string(newClaimValue(&p))
	lease := encTime(p.LeaseUntil)
	marked := strings.Replace(v, ";;0:"+lease+";", ";;0:0"+lease+";", 1)
	if marked == v {
		t.Fatal("lease not found in the value")
	}
	a, err := decodeRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeRecord(marked)
	if err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("marked value decodes as %+v, %v; unmarked as %+v", b, err, a)
	}
}
