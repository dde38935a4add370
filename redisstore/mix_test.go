package redisstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

// claimPaths pins Claim to one of its paths: the plain read first, or the
// claim straight away, by SET NX GET (Redis 7.0+) or by the claim script
// alone (older servers).
var claimPaths = []struct {
	name      string
	readFirst bool
	setNXGet  bool
}{{"read-first", true, true}, {"claim-first", false, true}, {"script-only", false, false}}

// TestClaimPathsAgree runs the claim outcomes (new, duplicate, own, expired
// take-over, replay of a finished record) through every claim path.
func TestClaimPathsAgree(t *testing.T) {
	for _, path := range claimPaths {
		t.Run(path.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, c redis.UniversalClient) {
				s := newStoreOn(t, c, Config{})
				s.setNXGet = s.setNXGet && path.setNXGet
				pin := func() { s.mix.Pin(path.readFirst) }
				ctx := context.Background()
				pin()
				first := mustClaim(t, s, claimP("k", "a1", t0))
				if !first.Claimed || first.Record.Fence != 1 {
					t.Fatalf("first claim: %+v", first)
				}
				pin()
				own := mustClaim(t, s, claimP("k", "a1", t0.Add(time.Second)))
				if !own.Claimed || !reflect.DeepEqual(own.Record, first.Record) {
					t.Fatalf("own claim: %+v, want the first record %+v", own, first.Record)
				}
				pin()
				dup := mustClaim(t, s, claimP("k", "a2", t0.Add(time.Second)))
				if dup.Claimed || !reflect.DeepEqual(dup.Record, first.Record) {
					t.Fatalf("duplicate: %+v, want unclaimed %+v", dup, first.Record)
				}
				done, err := s.Finish(ctx, finishP(first.Record, idem.StateSucceeded, "ok", t0.Add(2*time.Second)))
				if err != nil {
					t.Fatal(err)
				}
				pin()
				rep := mustClaim(t, s, claimP("k", "a3", t0.Add(3*time.Second)))
				if rep.Claimed || !reflect.DeepEqual(rep.Record, *done) {
					t.Fatalf("replay: %+v, want unclaimed %+v", rep, *done)
				}
				after := t0.Add(2 * time.Hour) // past ExpiresAt
				pin()
				re := mustClaim(t, s, claimP("k", "a4", after))
				if !re.Claimed || re.Record.Fence != 2 || re.Record.Result != nil || !re.Record.CompletedAt.IsZero() {
					t.Fatalf("take-over of the expired record: %+v", re)
				}
				got, err := s.Get(ctx, "tenant-a", "k")
				if err != nil || !reflect.DeepEqual(*got, re.Record) {
					t.Fatalf("stored after take-over: %+v, %v; want %+v", got, err, re.Record)
				}
			})
		})
	}
}

// TestClaimMixSwitches shows the mix follows the workload: duplicates turn
// the read-first path on, first-time claims turn it off.
func TestClaimMixSwitches(t *testing.T) {
	s := newStoreOn(t, standaloneClient(t), Config{})
	s.mix.Pin(false)
	mustClaim(t, s, claimP("dup", "a", t0))
	for range 2*claimmix.Bound + 1 {
		mustClaim(t, s, claimP("dup", "other", t0))
	}
	if !s.mix.ReadFirst() {
		t.Fatalf("after a run of duplicates the read-first path is off (score %d)", s.mix.Score())
	}
	for i := range 2*claimmix.Bound + 1 {
		mustClaim(t, s, claimP("new-"+string(rune('a'+i)), "a", t0))
	}
	if s.mix.ReadFirst() {
		t.Fatalf("after a run of first-time claims the read-first path is on (score %d)", s.mix.Score())
	}
}

// TestReadFirstOffForReplicaReads: a Cluster client that may read from
// replicas never takes the read-first path.
func TestReadFirstOffForReplicaReads(t *testing.T) {
	for _, o := range []*redis.ClusterOptions{{ReadOnly: true}, {RouteByLatency: true}, {RouteRandomly: true}} {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"},
			ReadOnly: o.ReadOnly, RouteByLatency: o.RouteByLatency, RouteRandomly: o.RouteRandomly})
		if primaryReads(c) {
			t.Errorf("%+v: read-first allowed", o)
		}
		c.Close()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer c.Close()
	if !primaryReads(c) {
		t.Error("plain cluster client: read-first refused")
	}
}
