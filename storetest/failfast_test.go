package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// claimRefused is a store whose Claim fails for the keys fail selects.
type claimRefused struct {
	*memstore.Store
	fail func(key string) bool
}

func (c claimRefused) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if c.fail(p.Key) {
		return idem.ClaimResult{}, errors.New("claim refused")
	}
	return c.Store.Claim(ctx, p)
}

// The engine cases that start an effect in the background and wait for it
// must fail at once when its claim fails, not wait for an effect that never
// starts until the package's timeout. The suite runs in a child process
// against a store that refuses those claims; the child must fail with the
// suite's message, not time out.
func TestEngineCasesFailFastWhenClaimFails(t *testing.T) {
	if os.Getenv("STORETEST_CLAIM_REFUSED") == "1" {
		storetest.Run(t, storetest.Harness{NewStore: func(t *testing.T) idem.Store {
			if strings.Contains(t.Name(), "Divergence") {
				return claimRefused{memstore.New(), func(k string) bool { return k == "k2" }}
			}
			return claimRefused{memstore.New(), func(string) bool { return true }}
		}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEngineCasesFailFastWhenClaimFails$/^Engine$/^(Divergence|WaitersAfterRelease)$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), "STORETEST_CLAIM_REFUSED=1")
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("the suite passed against a store that refuses claims:\n%s", out)
	case strings.Contains(string(out), "test timed out"):
		t.Fatalf("the suite hung instead of failing:\n%s", out)
	}
	for _, name := range []string{"Divergence", "WaitersAfterRelease"} {
		if !strings.Contains(string(out), "--- FAIL: TestEngineCasesFailFastWhenClaimFails/Engine/"+name) {
			t.Errorf("case %s did not fail:\n%s", name, out)
		}
	}
	if n := strings.Count(string(out), "returned before its effect started"); n != 2 {
		t.Errorf("%d cases said their first call returned before its effect started, want 2:\n%s", n, out)
	}
}
