package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/internal/testenv"
)

// TestRedisRawWait: with wait_replicas in the DSN, the raw side follows
// each SET NX with the same WAIT (for wait_replicas=all, the replicas the
// primary had at the start), the header says so, and a WAIT that cannot
// be met is an error on the raw side as on idem's.
func TestRedisRawWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a replica")
	}
	primary := testenv.StartRedisNode(t, 7392)
	testenv.StartRedisNode(t, 7393, "--replicaof", "127.0.0.1", "7392")
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		d, _ := storeopen.Parse("redis://" + primary.Addr() + "/0?wait_replicas=all")
		tg, err := openRedisTarget(ctx, d, scratchName())
		if err != nil {
			t.Fatal(err)
		}
		raw := tg.raw.(*redisRaw)
		if raw.replicas[""] == 1 {
			if !strings.Contains(tg.durability, "WAIT for all replicas ([1] online)") {
				t.Errorf("durability %q does not say what claims wait for", tg.durability)
			}
			ok, err := raw.insert(ctx, "k1")
			if err != nil || !ok {
				t.Fatalf("raw insert with WAIT: %v, %v", ok, err)
			}
			raw.wait.Replicas = 2 // more than there are
			raw.wait.Timeout = 50 * time.Millisecond
			if _, err := raw.insert(ctx, "k2"); err == nil || !strings.Contains(err.Error(), "WAIT 2 acknowledged by 1") {
				t.Fatalf("raw insert waiting for 2 of 1 replica: %v", err)
			}
			_ = tg.cleanup(ctx)
			return
		}
		_ = tg.cleanup(ctx)
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not come online: %v", raw.replicas)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
