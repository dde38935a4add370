package natsstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
)

// pair returns a store on a fresh bucket of the shared server and a peer
// on the same bucket over its own connection.
func pair(t *testing.T) (*Store, *Store) {
	url := sharedURL(t)
	nc := connect(t, url)
	s := newStore(t, nc, newBucket(t, nc, 1))
	return s, newStore(t, connect(t, url), s.bucket)
}

// TestWriteConditionalOnRevision: a write decided on a record that
// another store changes before the write lands is refused and decided
// again: the holder's late outcome, after a re-claim, is fenced.
func TestWriteConditionalOnRevision(t *testing.T) {
	s, peer := pair(t)
	ctx := context.Background()
	res, err := s.Claim(ctx, claimP("k", "a1", t0))
	if err != nil {
		t.Fatal(err)
	}
	stepped := false
	s.writeGap = func() {
		if stepped {
			return
		}
		stepped = true
		if _, err := peer.Resolve(ctx, idem.ResolveParams{Scope: "tenant-a", Key: "k", From: []idem.State{idem.StateInProgress},
			To: idem.StateInProgress, AttemptID: "a2", Now: t0, LeaseUntil: t0.Add(time.Minute)}); err != nil {
			t.Errorf("peer re-drive: %v", err)
		}
	}
	r := res.Record
	_, err = s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("late"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish after a re-claim in its gap = %v, want ErrFenced", err)
	}
	got, err := peer.Get(ctx, "tenant-a", "k")
	if err != nil || got.AttemptID != "a2" || got.State != idem.StateInProgress || got.Fence != r.Fence+1 {
		t.Fatalf("record after the race = %+v, %v; want the re-claim a2 at fence %d", got, err, r.Fence+1)
	}
}

// TestFinishHintFenced: Finish given the caller's claim writes at the
// claim's revision; a record re-driven by another store since is not
// overwritten.
func TestFinishHintFenced(t *testing.T) {
	s, peer := pair(t)
	ctx := context.Background()
	res, err := s.Claim(ctx, claimP("k", "a1", t0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Resolve(ctx, idem.ResolveParams{Scope: "tenant-a", Key: "k", From: []idem.State{idem.StateInProgress},
		To: idem.StateInProgress, AttemptID: "a2", Now: t0, LeaseUntil: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := res.Record
	// The late holder writes with the fence it was re-driven away from.
	// Its hint matches its params, so the remembered revision is tried.
	_, err = s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("late"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r})
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish with a stale hint = %v, want ErrFenced", err)
	}
	// The hint path is the one a fresh claim takes: one write, the answer
	// built from the claim, equal to what a read gives.
	r = mustClaim(t, s, claimP("k2", "b1", t0))
	out, err := s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r})
	if err != nil {
		t.Fatal(err)
	}
	got, err := peer.Get(ctx, "tenant-a", "k2")
	if err != nil || got.State != idem.StateSucceeded || string(got.Result) != "ok" || got.CreatedAt != out.CreatedAt || got.Fence != out.Fence {
		t.Fatalf("stored %+v (%v), answered %+v", got, err, out)
	}
}

// TestSweepSparesReclaimed: an expired record re-claimed between Sweep's
// scan and its delete survives the sweep.
func TestSweepSparesReclaimed(t *testing.T) {
	s, peer := pair(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimP("k", "a1", t0))
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("v"), CompletedAt: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	s.writeGap = func() {
		res, err := peer.Claim(ctx, claimP("k", "a2", later))
		if err != nil || !res.Claimed {
			t.Errorf("re-claim in the sweep's gap: %+v, %v", res, err)
		}
	}
	n, err := s.Sweep(ctx, idem.SweepParams{Now: later})
	if err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want 0 deleted (the record was re-claimed)", n, err)
	}
	got, err := peer.Get(ctx, "tenant-a", "k")
	if err != nil || got.AttemptID != "a2" {
		t.Fatalf("re-claimed record after the sweep: %+v, %v", got, err)
	}
}

// TestFinishAfterHeartbeat: the one-request outcome after a heartbeat
// answers, and stores, the heartbeat's lease: what a read gives.
func TestFinishAfterHeartbeat(t *testing.T) {
	s, peer := pair(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimP("k", "a1", t0))
	lease := t0.Add(5 * time.Minute)
	if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID, LeaseUntil: lease}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour), Claim: r})
	if err != nil {
		t.Fatal(err)
	}
	got, err := peer.Get(ctx, "tenant-a", "k")
	if err != nil {
		t.Fatal(err)
	}
	if !got.LeaseUntil.Equal(lease) || !out.LeaseUntil.Equal(lease) || got.State != idem.StateSucceeded {
		t.Fatalf("after a heartbeat to %v: stored lease %v (%s), answered %v", lease, got.LeaseUntil, got.State, out.LeaseUntil)
	}
}

// laggingWatcher is a KV watch as a consumer placed on a replica that lags
// the stream's leader gives it: its end-of-initial-values marker comes
// first (the replica counted nothing pending), and the values follow late,
// as the replica catches up.
type laggingWatcher struct {
	w   jetstream.KeyWatcher
	out chan jetstream.KeyValueEntry
}

func lagging(w jetstream.KeyWatcher, lag time.Duration) *laggingWatcher {
	l := &laggingWatcher{w: w, out: make(chan jetstream.KeyValueEntry)}
	go func() {
		defer close(l.out)
		l.out <- nil
		time.Sleep(lag)
		for e := range w.Updates() {
			if e != nil {
				l.out <- e
			}
		}
	}()
	return l
}

func (l *laggingWatcher) Updates() <-chan jetstream.KeyValueEntry { return l.out }
func (l *laggingWatcher) Stop() error                             { return l.w.Stop() }

// TestScanReadsPastAnEarlyMarker: List and Sweep read on, past a watch's
// end-of-initial-values marker that came before the values (a consumer
// on a lagging replica), until what the leader held when they began has
// arrived: no record is missing from the list, and no expired one is
// left unswept.
func TestScanReadsPastAnEarlyMarker(t *testing.T) {
	s, _ := pair(t)
	ctx := context.Background()
	const n = 5
	for i := range n {
		r := mustClaim(t, s, claimP(fmt.Sprintf("k%d", i), "a1", t0))
		if i%2 == 0 {
			continue
		}
		if _, err := s.Finish(ctx, idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
			State: idem.StateSucceeded, Result: []byte("v"), CompletedAt: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// The last message of the bucket a tombstone: the scan must take it
	// as the end it waits for, and leave its key out.
	r := mustClaim(t, s, claimP("gone", "a1", t0))
	if err := s.Release(ctx, idem.ReleaseParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID}); err != nil {
		t.Fatal(err)
	}
	s.scanWatch = func(ctx context.Context, filter string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
		w, err := s.kv.Watch(ctx, filter, opts...)
		if err != nil {
			return nil, err
		}
		return lagging(w, 100*time.Millisecond), nil
	}
	recs, err := s.List(ctx, idem.ListFilter{Scope: "tenant-a"})
	if err != nil || len(recs) != n {
		t.Fatalf("List behind an early marker = %d records, %v; want %d", len(recs), err, n)
	}
	swept, err := s.Sweep(ctx, idem.SweepParams{Now: t0.Add(time.Hour)})
	if err != nil || swept != n/2 {
		t.Fatalf("Sweep behind an early marker = %d, %v; want %d", swept, err, n/2)
	}
}
