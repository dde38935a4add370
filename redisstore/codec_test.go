package redisstore

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// TestCodecRoundTrip encodes claims with awkward strings (separators,
// digits, empty parts) and decodes them back.
func TestCodecRoundTrip(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, p := range []idem.ClaimParams{
		{Scope: "", Key: "k", AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)},
		{Scope: "s:1;2", Key: "12:3;4:", AttemptID: "7:x;", Fingerprint: idem.NewFingerprint([]byte("b")),
			Intent: []byte("I1p1:1:a;;0:"), Now: now, LeaseUntil: now.Add(time.Hour)},
		{Scope: "ü", Key: strings.Repeat("k", 255), AttemptID: "", Now: time.Unix(-5, 0).UTC()},
	} {
		r, err := decodeRecord(string(newClaimValue(&p)))
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		want := idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
			Fence: 1, AttemptID: p.AttemptID, Intent: p.Intent, CreatedAt: p.Now, LeaseUntil: utcMicro(p.LeaseUntil)}
		if !reflect.DeepEqual(*r, want) {
			t.Fatalf("decoded %+v\nwant    %+v", *r, want)
		}
	}
	// okTail completes "I1p1:1:a" into a valid value.
	const okTail = ";;0:;;0:0:0:" + "ffffffffffffffffffffffffffffffff"
	if _, err := decodeRecord("I1p1:1:a" + okTail); err != nil {
		t.Fatalf("valid value: %v", err)
	}
	for _, bad := range []string{"", "I", "I1", "I1x1:1:a", "I1p1:9:a", "I1p1:1:a;;0:;;0:0:0:", "I1p1:1:a;;0:;;0:0:0:" + strings.Repeat("f", 31),
		// numbers: negative or empty fences and lengths, overflow, stray signs and digits
		"I1p-1:1:a" + okTail, "I1p:1:a" + okTail, "I1p1:-1:a" + okTail, "I1p99999999999999999999:1:a" + okTail,
		"I1p1:1:a-;;" + okTail[2:], "I1p1:1:a1x;;" + okTail[2:], "I1p1:1:a" + okTail[:5] + "-" + okTail[5:]} {
		if _, err := decodeRecord(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// TestHolderTokenIsExact: a token matches the stored header only for the
// same fence and attempt, whatever the digits and separators in the
// attempt id (the scripts compare it as a prefix).
func TestHolderTokenIsExact(t *testing.T) {
	type holder struct {
		fence   int64
		attempt string
	}
	hs := []holder{{1, "a"}, {11, "a"}, {1, "1:a"}, {1, ""}, {1, "a:"}, {12, ":a"}, {1, "2:12:a"}}
	for _, stored := range hs {
		p := idem.ClaimParams{AttemptID: stored.attempt}
		pre, post := claimValue(&p)
		v := pre + strconv.FormatInt(stored.fence, 10) + string(post)
		for _, h := range hs {
			tok := holderToken(h.fence, h.attempt)
			match := strings.HasPrefix(v[3:], tok)
			if match != (h == stored) {
				t.Errorf("stored %+v, token of %+v (%q): prefix match %v", stored, h, tok, match)
			}
		}
	}
}

// TestOldLayoutRefused: a record key holding a hash (the layout before
// "I1") or a string of another layout is refused with a clear error by
// every operation, never read as absent or overwritten.
func TestOldLayoutRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{})
		if err := c.HSet(ctx, s.recKey("tenant-a", "old"), "st", "succeeded", "f", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, s.recKey("tenant-a", "v9"), "I9p1:1:a", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"old", "v9"} {
			s.mix.Pin(false)
			_, err := s.Claim(ctx, claimP(key, "a", t0))
			if !errors.Is(err, errOldLayout) {
				t.Errorf("%s: Claim = %v, want the old-layout error", key, err)
			}
			s.mix.Pin(true)
			if _, err := s.Claim(ctx, claimP(key, "a", t0)); !errors.Is(err, errOldLayout) {
				t.Errorf("%s: read-first Claim = %v, want the old-layout error", key, err)
			}
			if _, err := s.Get(ctx, "tenant-a", key); !errors.Is(err, errOldLayout) {
				t.Errorf("%s: Get = %v, want the old-layout error", key, err)
			}
			_, err = s.Finish(ctx, finishP(idem.Record{Scope: "tenant-a", Key: key, Fence: 1, AttemptID: "a"}, idem.StateSucceeded, "v", t0))
			if err == nil || errors.Is(err, idem.ErrFenced) {
				t.Errorf("%s: Finish = %v, want an error other than fenced", key, err)
			}
		}
		if _, err := s.List(ctx, idem.ListFilter{}); !errors.Is(err, errOldLayout) {
			t.Errorf("List = %v, want the old-layout error", err)
		}
		if typ := c.Type(ctx, s.recKey("tenant-a", "old")).Val(); typ != "hash" {
			t.Errorf("the old record was overwritten: type %s", typ)
		}
	})
}

func TestParseBulk(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		v         string
		found, ok bool
	}{
		{"_\r\n", "", false, true},
		{"$-1\r\n", "", false, true},
		{"$0\r\n\r\n", "", true, true},
		{"$5\r\nI1p\r\n\r\n", "I1p\r\n", true, true},
		{"-WRONGTYPE Operation against a key\r\n", "", false, false},
		{"-MOVED 3999 127.0.0.1:7001\r\n", "", false, false},
		{"!5\r\nERR x\r\n", "", false, false},
		{"+OK\r\n", "", false, false},
		{"$5\r\nab\r\n", "", false, false},
		{"$x\r\n\r\n", "", false, false},
		{"", "", false, false},
	} {
		v, found, ok := parseBulk([]byte(tc.raw))
		if v != tc.v || found != tc.found || ok != tc.ok {
			t.Errorf("parseBulk(%q) = %q, %v, %v; want %q, %v, %v", tc.raw, v, found, ok, tc.v, tc.found, tc.ok)
		}
	}
}

func TestRecChanKeys(t *testing.T) {
	s := &Store{prefix: "p"}
	for _, pr := range [][2]string{{"", ""}, {"a:b", "c"}, {"{x}", "ü%"}} {
		rec, ch := s.recChanKeys(pr[0], pr[1])
		if rec != s.recKey(pr[0], pr[1]) || ch != chanKey(rec) {
			t.Errorf("%q: recChanKeys = %q, %q; want %q, %q", pr, rec, ch, s.recKey(pr[0], pr[1]), chanKey(s.recKey(pr[0], pr[1])))
		}
	}
}

// TestNewClaimValueOneAllocation: the claim's value is built in one
// allocation of its exact length, whatever the lengths (a short capacity
// estimate grows the buffer, a second allocation and a copy), and in
// none into a buffer with the room.
func TestNewClaimValueOneAllocation(t *testing.T) {
	for _, now := range []time.Time{time.Unix(1<<40, 999), time.Unix(-1<<40, 0), {}} {
		for _, n := range []int{0, 9, 10, 5000} {
			long := strings.Repeat("x", n)
			p := idem.ClaimParams{Scope: "scope" + long, Key: "k" + long, AttemptID: strings.Repeat("a", 32) + long,
				Intent: []byte("{}" + long), Now: now, LeaseUntil: now.Add(time.Hour)}
			v := newClaimValue(&p)
			if len(v) != newClaimLen(&p) {
				t.Fatalf("n=%d %v: value of %d bytes, newClaimLen %d", n, now, len(v), newClaimLen(&p))
			}
			if a := testing.AllocsPerRun(100, func() { _ = newClaimValue(&p) }); a != 1 {
				t.Fatalf("newClaimValue: %v allocations, want 1", a)
			}
			buf := make([]byte, 0, len(v))
			if a := testing.AllocsPerRun(100, func() { _ = appendNewClaimValue(buf, &p) }); a != 0 {
				t.Fatalf("appendNewClaimValue into room: %v allocations, want 0", a)
			}
		}
	}
}

// TestFinishArgs: with the caller's claim, Finish's expected value is
// byte for byte the value the claim wrote, and its new value decodes to
// the claim with the outcome over it; the arguments take one allocation
// whatever the lengths, and none of their own when they fit the call.
func TestFinishArgs(t *testing.T) {
	s := &Store{prefix: "p", grace: time.Minute}
	now := time.Date(1900, 1, 1, 0, 0, 0, 999, time.FixedZone("x", 3600)) // negative, off the microsecond
	for _, n := range []int{0, 1, 5000} {
		long := strings.Repeat("x", n)
		cp := idem.ClaimParams{Scope: "s" + long, Key: "k" + long, AttemptID: "a" + long, Intent: []byte(long),
			Fingerprint: idem.NewFingerprint([]byte(long)), Now: now, LeaseUntil: now.Add(time.Hour)}
		claim := idem.Record{Scope: cp.Scope, Key: cp.Key, Fingerprint: cp.Fingerprint, State: idem.StateInProgress,
			Fence: 1, AttemptID: cp.AttemptID, Intent: cp.Intent, CreatedAt: utcMicro(cp.Now), LeaseUntil: utcMicro(cp.LeaseUntil)}
		fp := idem.FinishParams{Scope: cp.Scope, Key: cp.Key, Fence: 1, AttemptID: cp.AttemptID, State: idem.StateSucceeded,
			Result: []byte("r" + long), CompletedAt: now, ExpiresAt: now.Add(time.Hour), Claim: claim}
		exp, val, pxat := s.finishArgs(&fp, nil)
		if string(exp) != string(newClaimValue(&cp)) {
			t.Fatalf("n=%d: expected value %q\nclaim wrote    %q", n, exp, newClaimValue(&cp))
		}
		got, err := decodeRecord(string(val))
		want, _ := finishRecord(&fp, "", true)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("n=%d: new value decodes to %+v, %v\nwant %+v", n, got, err, want)
		}
		if string(pxat) != strconv.FormatInt(fp.ExpiresAt.Add(time.Minute).UnixMilli(), 10) {
			t.Fatalf("n=%d: pxat %q", n, pxat)
		}
		// A take-over claim (fence 2) wrote pre + "2" + post.
		fp.Fence, fp.Claim.Fence = 2, 2
		pre, post := claimValue(&cp)
		if exp, _, _ := s.finishArgs(&fp, nil); string(exp) != pre+"2"+string(post) {
			t.Fatalf("n=%d: fence 2: expected value %q", n, exp)
		}
		// The arguments are sized exactly: they fit a buffer of their
		// length without an allocation, and take one otherwise, for every
		// shape (claim or none, unknown, no expiry).
		unknown, noExpiry, noClaim := fp, fp, fp
		unknown.State = idem.StateUnknown
		noExpiry.ExpiresAt = time.Time{}
		noClaim.Claim = idem.Record{}
		for _, p := range []*idem.FinishParams{&fp, &unknown, &noExpiry, &noClaim} {
			exp, val, pxat := s.finishArgs(p, nil)
			size := len(exp) + len(val) + len(pxat)
			exact, short := make([]byte, 0, size), make([]byte, 0, size-1)
			if a := testing.AllocsPerRun(100, func() { s.finishArgs(p, exact) }); a != 0 {
				t.Fatalf("n=%d %s: finishArgs into %d bytes: %v allocations, want 0", n, p.State, size, a)
			}
			if a := testing.AllocsPerRun(100, func() { s.finishArgs(p, short) }); a != 1 {
				t.Fatalf("n=%d %s: finishArgs into %d bytes: %v allocations, want 1", n, p.State, size-1, a)
			}
		}
		if a := testing.AllocsPerRun(100, func() { s.newFinishCall(&fp) }); n == 0 && a != 2 {
			t.Fatalf("newFinishCall: %v allocations, want 2 (the call and its keys)", a)
		}
	}
}

func TestDecLen(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 99, 100, -1, -9, -10, 1<<63 - 1, -1 << 63, 1e18, -1e18} {
		if got, want := decLen(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("decLen(%d) = %d, want %d", n, got, want)
		}
	}
}
