package bench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem/memstore"
)

// callLog wraps a raw store and records the calls made on it, in order.
type callLog struct {
	rawStore
	on    bool // set once the workload's replay keys are recorded
	calls []string
}

func (c *callLog) note(call string) {
	if c.on {
		c.calls = append(c.calls, call)
	}
}

func (c *callLog) insert(ctx context.Context, key string) (bool, error) {
	c.note("insert")
	return c.rawStore.insert(ctx, key)
}

func (c *callLog) update(ctx context.Context, key string, result []byte) error {
	c.note("update")
	return c.rawStore.update(ctx, key, result)
}

func (c *callLog) read(ctx context.Context, key string) (bool, error) {
	c.note("read")
	return c.rawStore.read(ctx, key)
}

// In the mixed scenario the raw side must not know which requests are
// first-time: a baseline that sends INSERT + UPDATE for exactly the new
// keys and a lone SELECT for the others makes one round trip fewer per
// first-time request than any idempotent request can. It reads first, as
// idem's stores do when most requests are replays.
func TestMixedRawSideReadsBeforeItClaims(t *testing.T) {
	ctx := context.Background()
	log := &callLog{rawStore: newMemRaw()}
	w, err := newWorkload(memstore.New(), log, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer w.eng.Close()
	defer w.cacheEng.Close()
	if err := w.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	log.on = true // prepare's callers are done: the requests below run one at a time
	op := w.opFor(ScenarioMixed, sideRaw, "m-")
	for n, want := range map[int64][]string{
		10: {"read", "insert", "update"}, // a new key
		11: {"read"},                     // a recorded one
	} {
		log.calls = nil
		out, err := op(ctx, n)
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		if wantOut := map[bool]outcome{true: outFirst, false: outReplay}[n%10 == 0]; out != wantOut {
			t.Errorf("request %d ended as %d, want %d", n, out, wantOut)
		}
		if !slices.Equal(log.calls, want) {
			t.Errorf("request %d made %s, want %s", n, strings.Join(log.calls, ", "), strings.Join(want, ", "))
		}
	}
	// A key recorded meanwhile by a concurrent claimer is read, not claimed.
	if _, err := w.rawFirst(ctx, "m-20"); err != nil {
		t.Fatal(err)
	}
	log.calls = nil
	if out, err := op(ctx, 20); err == nil || out == outFirst {
		t.Errorf("request 20 on a key already recorded: outcome %d, err %v; want the unexpected-outcome error", out, err)
	}
	if want := []string{"read"}; !slices.Equal(log.calls, want) {
		t.Errorf("request 20 made %s, want %s", strings.Join(log.calls, ", "), strings.Join(want, ", "))
	}
}
