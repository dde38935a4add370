package redisstore

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// FuzzDecodeRecord feeds decodeRecord what a record key may hold — a value
// of this layout, another version's, or damaged bytes — and checks that it
// never panics, that every string it returns lies inside the value, and
// that a claim's value built from the fuzzed fields decodes back to them,
// whatever separators and digits they contain.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Unix(1_700_000_000, 123_456_000).UTC()
	f.Add("I1p1:1:a;;0:;;0:0:0:ffffffffffffffffffffffffffffffff", "s", "k", "a", []byte(nil), int64(60))
	f.Add("I1s3:2:ab1700000000000000;1700000000000000;2:ok;;0:1:s1:k"+strings.Repeat("x", 32)+"{}",
		"s:1;2", "12:3;4:", "7:x;", []byte("I1p1:1:a;;0:"), int64(-5))
	f.Add("I1", "", "", "", []byte{}, int64(0))
	f.Add("I1p99999999999999999999:1:a", "ü", strings.Repeat("k", 255), "", []byte("{\"a\":1}"), int64(1<<40))
	f.Fuzz(func(t *testing.T, v, scope, key, attempt string, intent []byte, leaseSec int64) {
		if r, err := decodeRecord(v); err == nil {
			for _, s := range []string{r.AttemptID, r.Scope, r.Key, string(r.Mark), string(r.Result), string(r.Intent)} {
				if !strings.Contains(v, s) {
					t.Fatalf("decoded %q, which is not in the value %q", s, v)
				}
			}
			if !r.State.Valid() || r.Fence < 0 {
				t.Fatalf("decoded state %q, fence %d from %q", r.State, r.Fence, v)
			}
		}

		p := idem.ClaimParams{Scope: scope, Key: key, AttemptID: attempt, Intent: intent,
			Fingerprint: idem.NewFingerprint([]byte(v)), Now: now,
			LeaseUntil: now.Add(time.Duration(leaseSec%(1<<30)) * time.Second)}
		val := newClaimValue(&p)
		if len(val) != newClaimLen(&p) {
			t.Fatalf("claim value is %d bytes, newClaimLen says %d", len(val), newClaimLen(&p))
		}
		r, err := decodeRecord(string(val))
		if err != nil {
			t.Fatalf("claim %+v: %v", p, err)
		}
		if r.Scope != scope || r.Key != key || r.AttemptID != attempt || !bytes.Equal(r.Intent, intent) ||
			r.Fingerprint != p.Fingerprint || r.Fence != 1 || r.State != idem.StateInProgress ||
			!r.CreatedAt.Equal(p.Now) || !r.LeaseUntil.Equal(utcMicro(p.LeaseUntil)) {
			t.Fatalf("claim %+v decoded as %+v", p, *r)
		}
	})
}
