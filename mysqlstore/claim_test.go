package mysqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestClaimNewRecordRoundTrips(t *testing.T) {
	f := newFixture(t)
	p := claimParams("k1", "a1", t0)
	res := mustClaim(t, f.st, p)
	if !res.Claimed || res.Record.Fence != 1 || res.Record.State != idem.StateInProgress {
		t.Fatalf("first claim = %+v, want claimed in_progress at fence 1", res)
	}
	got, err := f.st.Get(context.Background(), p.Scope, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	want := idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress, Fence: 1,
		AttemptID: p.AttemptID, Intent: p.Intent, CreatedAt: t0, LeaseUntil: t0.Add(30 * time.Second),
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("Get =\n%+v\nwant\n%+v", *got, want)
	}
	if !reflect.DeepEqual(res.Record, want) {
		t.Fatalf("Claim record =\n%+v\nwant\n%+v", res.Record, want)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
	}
}

func TestClaimTimesComeBackInUTC(t *testing.T) {
	f := newFixture(t)
	tokyo := time.FixedZone("JST", 9*3600)
	p := claimParams("k", "a", t0.In(tokyo))
	mustClaim(t, f.st, p)
	got, err := f.st.Get(context.Background(), p.Scope, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt != t0 {
		t.Fatalf("CreatedAt = %v, want %v in UTC", got.CreatedAt, t0)
	}
}

func TestClaimDuplicateReturnsExisting(t *testing.T) {
	f := newFixture(t)
	first := mustClaim(t, f.st, claimParams("k1", "a1", t0))
	p := claimParams("k1", "a2", t0.Add(time.Second))
	p.Fingerprint = fp("other")
	dup := mustClaim(t, f.st, p)
	if dup.Claimed {
		t.Fatal("duplicate claim by another attempt was Claimed")
	}
	if !reflect.DeepEqual(dup.Record, first.Record) {
		t.Fatalf("duplicate returned %+v, want the existing %+v", dup.Record, first.Record)
	}
}

func TestClaimSameAttemptAfterLostAnswer(t *testing.T) {
	f := newFixture(t)
	p := claimParams("k1", "a1", t0)
	mustClaim(t, f.st, p)
	again := mustClaim(t, f.st, p)
	if !again.Claimed || again.Record.Fence != 1 || again.Record.AttemptID != "a1" {
		t.Fatalf("retried claim = %+v, want Claimed true at fence 1", again)
	}
	// Once the attempt finished, its own retried claim is a replay.
	if _, err := f.st.Finish(context.Background(), succeed("k1", "a1", 1, "ok", t0)); err != nil {
		t.Fatal(err)
	}
	if after := mustClaim(t, f.st, p); after.Claimed {
		t.Fatal("claim by the same attempt after it finished was Claimed")
	}
}

func TestClaimKeysAreExactAndScoped(t *testing.T) {
	f := newFixture(t)
	mustClaim(t, f.st, claimParams("Order-1", "a1", t0))
	for _, p := range []idem.ClaimParams{
		claimParams("order-1", "a2", t0),  // case differs
		claimParams("Order-1 ", "a3", t0), // trailing space (PAD SPACE collations ignore it)
		func() idem.ClaimParams { p := claimParams("Order-1", "a4", t0); p.Scope = "tenant-2"; return p }(),
	} {
		if res := mustClaim(t, f.st, p); !res.Claimed {
			t.Errorf("claim scope %q key %q was not Claimed: it collided with another record", p.Scope, p.Key)
		}
	}
}

func TestClaimExpiredTerminalReclaimsWithNextFence(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k1", "a1", t0))
	fin := succeed("k1", "a1", 1, "ok", t0)
	if _, err := f.st.Finish(ctx, fin); err != nil {
		t.Fatal(err)
	}
	if f.st.SetMark(ctx, "tenant-1", "k1", 1, idem.MarkReconciled) != nil {
		t.Fatal("SetMark failed")
	}
	// Just before expiry: still a replay.
	if res := mustClaim(t, f.st, claimParams("k1", "a2", fin.ExpiresAt.Add(-time.Microsecond))); res.Claimed {
		t.Fatal("claim before expiry was Claimed")
	}
	later := fin.ExpiresAt
	res := mustClaim(t, f.st, claimParams("k1", "a2", later))
	if !res.Claimed || res.Record.Fence != 2 || res.Record.AttemptID != "a2" {
		t.Fatalf("claim at expiry = %+v, want Claimed at fence 2", res)
	}
	got, err := f.st.Get(ctx, "tenant-1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, res.Record) {
		t.Fatalf("stored %+v, claim returned %+v", *got, res.Record)
	}
	if got.Result != nil || !got.ExpiresAt.IsZero() || !got.CompletedAt.IsZero() || got.Mark != "" {
		t.Fatalf("re-claimed record kept old outcome fields: %+v", got)
	}
}

func TestClaimUnknownNeverExpires(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mustClaim(t, f.st, claimParams("k1", "a1", t0))
	unk := idem.FinishParams{Scope: "tenant-1", Key: "k1", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}
	if _, err := f.st.Finish(ctx, unk); err != nil {
		t.Fatal(err)
	}
	if res := mustClaim(t, f.st, claimParams("k1", "a2", t0.Add(1000*time.Hour))); res.Claimed || res.Record.State != idem.StateUnknown {
		t.Fatalf("claim over unknown = %+v, want the unknown record, not Claimed", res)
	}
}

func TestClaimRefusesValuesTheColumnsCannotHold(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("k", idem.MaxKeyLen+1)
	if _, err := f.st.Claim(context.Background(), claimParams(long, "a", t0)); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("256-byte key: err = %v, want ErrInvalidKey", err)
	}
	if _, err := f.st.Claim(context.Background(), claimParams("", "a", t0)); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("empty key: err = %v, want ErrInvalidKey", err)
	}
	p := claimParams("k", "a", t0)
	p.Scope = strings.Repeat("s", 256)
	if _, err := f.st.Claim(context.Background(), p); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("256-byte scope: err = %v, want an error naming scope", err)
	}
	// 255 bytes fit exactly.
	if res := mustClaim(t, f.st, claimParams(strings.Repeat("k", 255), "a", t0)); !res.Claimed {
		t.Fatal("255-byte key not claimed")
	}
	if n := countRows(t, f.db, f.table); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

func TestClaimNilAndEmptyIntentSurvive(t *testing.T) {
	f := newFixture(t)
	p := claimParams("nil", "a", t0)
	p.Intent = nil
	mustClaim(t, f.st, p)
	q := claimParams("empty", "a", t0)
	q.Intent = []byte{}
	mustClaim(t, f.st, q)
	a, _ := f.st.Get(context.Background(), p.Scope, "nil")
	b, _ := f.st.Get(context.Background(), p.Scope, "empty")
	if a.Intent != nil || b.Intent == nil || len(b.Intent) != 0 {
		t.Fatalf("intents = %#v, %#v; want nil and empty", a.Intent, b.Intent)
	}
}
