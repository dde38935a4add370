package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

func TestClaimFirstThenDuplicate(t *testing.T) {
	path := tempPath(t)
	s := openAt(t, path)
	p := claimParams("order-1", "att-1")
	first := mustClaim(t, s, p)
	if !first.Claimed || first.Record.Fence != 1 || first.Record.State != idem.StateInProgress {
		t.Fatalf("first claim = %+v, want claimed in_progress fence 1", first)
	}
	want := idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
		Fence: 1, AttemptID: "att-1", Intent: p.Intent, CreatedAt: t0, LeaseUntil: p.LeaseUntil,
	}
	if !equalRecord(first.Record, want) {
		t.Fatalf("claimed record\n got %+v\nwant %+v", first.Record, want)
	}

	version, changes := observer(t, path), totalChanges(t, s)
	before, beforeChanges := version(), changes
	dup := p
	dup.AttemptID, dup.Fingerprint = "att-2", idem.NewFingerprint([]byte("other"))
	got := mustClaim(t, s, dup)
	if got.Claimed || !equalRecord(got.Record, want) {
		t.Fatalf("duplicate claim = %+v, want the existing record unclaimed", got)
	}
	if after := version(); after != before {
		t.Errorf("data_version moved %d → %d: a duplicate claim wrote", before, after)
	}
	if after := totalChanges(t, s); after != beforeChanges {
		t.Errorf("total_changes moved %d → %d: a duplicate claim wrote", beforeChanges, after)
	}
}

// While duplicates dominate, a replay must be answered without the
// writer: here the writer's only connection is held by an open transaction
// for the whole call.
func TestReplayDoesNotTouchWriter(t *testing.T) {
	s := newStore(t)
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateSucceeded, "ok"))
	for range 2 * claimmix.Bound {
		if got := mustClaim(t, s, claimParams("order-1", "att-x")); got.Claimed {
			t.Fatal("a duplicate claimed")
		}
	}

	tx, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := s.Claim(ctx, claimParams("order-1", "att-2"))
	if err != nil {
		t.Fatalf("replay while the writer is busy: %v", err)
	}
	if got.Claimed || got.Record.State != idem.StateSucceeded || string(got.Record.Result) != "ok" {
		t.Fatalf("replay = %+v, want the succeeded record", got)
	}
}

func TestClaimLostAnswerRetry(t *testing.T) {
	s := newStore(t)
	p := claimParams("order-1", "att-1")
	first := mustClaim(t, s, p)
	// The first answer was lost; the same attempt retries.
	again := mustClaim(t, s, p)
	if !again.Claimed || again.Record.Fence != first.Record.Fence {
		t.Fatalf("retried claim = %+v, want claimed with fence %d", again, first.Record.Fence)
	}
	other := mustClaim(t, s, claimParams("order-1", "att-2"))
	if other.Claimed {
		t.Fatal("another attempt claimed a key held in progress")
	}
	mustFinish(t, s, finishParams(first.Record, idem.StateSucceeded, "ok"))
	if r := mustClaim(t, s, p); r.Claimed {
		t.Fatal("the same attempt re-claimed a finished record")
	}
}

func TestClaimReplacesOnlyExpiredTerminal(t *testing.T) {
	s := newStore(t)
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	done := mustFinish(t, s, finishParams(r, idem.StateFailed, "declined"))

	early := claimParams("order-1", "att-2")
	early.Now = done.ExpiresAt.Add(-time.Microsecond)
	if got := mustClaim(t, s, early); got.Claimed || got.Record.State != idem.StateFailed {
		t.Fatalf("claim before expiry = %+v, want the failed record replayed", got)
	}
	late := claimParams("order-1", "att-3")
	late.Now, late.LeaseUntil = done.ExpiresAt, done.ExpiresAt.Add(time.Minute)
	got := mustClaim(t, s, late)
	if !got.Claimed || got.Record.Fence != 2 || got.Record.AttemptID != "att-3" {
		t.Fatalf("claim at expiry = %+v, want claimed with fence 2", got)
	}
	if got.Record.Result != nil || !got.Record.CompletedAt.IsZero() || !got.Record.ExpiresAt.IsZero() ||
		!got.Record.CreatedAt.Equal(late.Now) {
		t.Fatalf("re-claimed record kept old outcome fields: %+v", got.Record)
	}
	// The late write of the old attempt is refused.
	if _, err := s.Finish(context.Background(), finishParams(r, idem.StateSucceeded, "x")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish with old fence after re-claim: %v, want ErrFenced", err)
	}
}

func TestClaimNeverReplacesUnknown(t *testing.T) {
	s := newStore(t)
	r := mustClaim(t, s, claimParams("order-1", "att-1")).Record
	mustFinish(t, s, finishParams(r, idem.StateUnknown, ""))
	p := claimParams("order-1", "att-2")
	p.Now = t0.Add(100 * 365 * 24 * time.Hour)
	if got := mustClaim(t, s, p); got.Claimed || got.Record.State != idem.StateUnknown {
		t.Fatalf("claim of unknown record = %+v, want it returned unclaimed", got)
	}
}

func TestClaimRejectsBadInput(t *testing.T) {
	s := newStore(t)
	bad := claimParams("", "att-1")
	if _, err := s.Claim(context.Background(), bad); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("empty key: %v, want ErrInvalidKey", err)
	}
	noAttempt := claimParams("k", "")
	if _, err := s.Claim(context.Background(), noAttempt); err == nil || errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("empty attempt id: %v, want a parameter error", err)
	}
}

// Exactly one of many concurrent claimers of one key wins, across keys.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	s := newStore(t)
	const workers, keys = 16, 20
	wins := make([]int, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range keys {
				p := claimParams(keyN(k), "att-"+keyN(w))
				r, err := s.Claim(context.Background(), p)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if r.Claimed {
					mu.Lock()
					wins[k]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for k, n := range wins {
		if n != 1 {
			t.Errorf("key %d claimed %d times, want 1", k, n)
		}
	}
}

func keyN(i int) string { return "k" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func equalRecord(a, b idem.Record) bool {
	return a.Scope == b.Scope && a.Key == b.Key && a.Fingerprint == b.Fingerprint &&
		a.State == b.State && a.Fence == b.Fence && a.AttemptID == b.AttemptID &&
		string(a.Intent) == string(b.Intent) && string(a.Result) == string(b.Result) &&
		a.Mark == b.Mark && a.CreatedAt.Equal(b.CreatedAt) && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.CompletedAt.Equal(b.CompletedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// A claim returns the record it inserted without reading it back: that
// record must be the one a read returns, byte for byte and at the stored
// (microsecond, UTC) precision, and must not share the caller's buffers.
func TestClaimedRecordIsTheStoredRecord(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	local := time.FixedZone("UTC+3", 3*3600)
	cases := []func(p *idem.ClaimParams){
		func(*idem.ClaimParams) {},
		func(p *idem.ClaimParams) { p.Intent = nil },
		func(p *idem.ClaimParams) { p.Intent = []byte{} },
		func(p *idem.ClaimParams) { p.LeaseUntil = time.Time{} },
		func(p *idem.ClaimParams) {
			p.Now = time.Date(2025, 3, 1, 15, 0, 0, 123456789, local)
			p.LeaseUntil = p.Now.Add(time.Minute + 999*time.Nanosecond)
		},
	}
	for i, edit := range cases {
		p := claimParams("k"+string(rune('a'+i)), "att")
		edit(&p)
		r := mustClaim(t, s, p)
		got, err := s.Get(ctx, p.Scope, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Claimed || !reflect.DeepEqual(r.Record, *got) {
			t.Fatalf("case %d: claim returned\n%#v\nstored\n%#v", i, r.Record, *got)
		}
		if len(p.Intent) > 0 {
			p.Intent[0] ^= 0xff
			if r.Record.Intent[0] == p.Intent[0] {
				t.Fatalf("case %d: the claimed record shares the caller's intent buffer", i)
			}
		}
	}
}

// TestProbeFollowsTheMix: while first-time claims dominate, a claim goes
// straight to the writer (the reader probe would only miss); once
// duplicates dominate again, they are answered by the probe.
func TestProbeFollowsTheMix(t *testing.T) {
	s := newStore(t)
	const n = 4 * claimmix.Bound
	for i := range n {
		if !mustClaim(t, s, claimParams(fmt.Sprint("new-", i), "a")).Claimed {
			t.Fatalf("first-time claim %d not claimed", i)
		}
	}
	if p := s.probes.Load(); p > 2 {
		t.Fatalf("%d reader probes for %d first-time claims: the probe does not follow the mix", p, n)
	}
	before := s.probes.Load()
	for range n {
		if mustClaim(t, s, claimParams("new-0", "b")).Claimed {
			t.Fatal("a duplicate claimed")
		}
	}
	if p := s.probes.Load() - before; p < n-2*claimmix.Bound {
		t.Fatalf("%d reader probes for %d duplicates: replays do not go back to the readers", p, n)
	}
}
