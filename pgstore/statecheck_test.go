package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/pgstore"
)

// Since migration 0004 the table has no CHECK constraint on state: a row
// whose state code no pgstore statement writes (another tool's UPDATE, a
// hand edit) must be refused when read — never taken for a state, never
// replayed — and a claim of its key must fail rather than run the effect.
func TestForeignStateCodeIsRefused(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, pgstore.Config{})
	c := mustClaim(t, s, claimParams("k-foreign", "a1", t0))
	if _, err := s.Finish(ctx, succeed(c, `{"ok":1}`, t0, time.Hour)); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for _, code := range []string{"x", "S"} {
		if _, err := sharedPool().Exec(ctx, `UPDATE `+s.QuotedTable()+` SET state = $1 WHERE key = $2`, code, "k-foreign"); err != nil {
			t.Fatalf("set state %q: %v", code, err)
		}
		if rec, err := s.Get(ctx, "tenant-1", "k-foreign"); err == nil || !strings.Contains(err.Error(), "state code") {
			t.Errorf("state %q: Get = %+v, %v; want a state-code error", code, rec, err)
		}
		if res, err := s.Claim(ctx, claimParams("k-foreign", "a2", t0.Add(time.Second))); err == nil {
			t.Errorf("state %q: Claim = %+v, nil; want a state-code error", code, res)
		}
	}
}
