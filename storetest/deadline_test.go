package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// blockingClaim is a store whose Claim never returns, whatever its
// context: a store that waits on a lock nobody will release.
type blockingClaim struct{ *memstore.Store }

func (blockingClaim) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	select {}
}

// TestSuiteFailsFastOnABlockedStore: a store whose claim blocks fails the
// conformance suite within its Harness.Deadline, naming the test, rather
// than hanging until go test's timeout. The suite runs in a child process
// (the deadline ends the binary) with a 2s deadline and a 2m timeout.
func TestSuiteFailsFastOnABlockedStore(t *testing.T) {
	if os.Getenv("STORETEST_CLAIM_BLOCKS") == "1" {
		storetest.Run(t, storetest.Harness{Deadline: 2 * time.Second, NewStore: func(t *testing.T) idem.Store {
			return blockingClaim{memstore.New()}
		}})
		return
	}
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteFailsFastOnABlockedStore$/^Contract$/^ClaimNew$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), "STORETEST_CLAIM_BLOCKS=1")
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("the suite passed against a store whose claim blocks:\n%s", out)
	case strings.Contains(string(out), "test timed out"):
		t.Fatalf("the suite hung until go test's timeout instead of failing at its deadline:\n%s", out)
	case !strings.Contains(string(out), "TestSuiteFailsFastOnABlockedStore/Contract/ClaimNew exceeded its deadline of 2s"):
		t.Fatalf("the failure does not name the blocked test and its deadline:\n%s", out)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("the blocked suite took %s to fail", d)
	}
}
