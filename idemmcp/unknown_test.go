package idemmcp_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/memstore"
)

// TestToolUnknownOutcomeIsNeverReleased: a tool whose call timed out at
// its provider says so with idem.Unknown. The record must stay unknown
// (evidence for reconciliation) and the agent must be told not to retry
// with a new key; the agent's retry with the same key is told the same
// and never runs the tool again. Releasing instead would free the key,
// and the retry would pay a second time.
func TestToolUnknownOutcomeIsNeverReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "v1"}, nil)
	g, err := idemmcp.NewGuard(server, idemmcp.Config{Engine: e, Scope: idemmcp.FixedScope("test")})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	type chargeIn struct {
		Amount int64 `json:"amount"`
	}
	idemmcp.AddTool(g, &mcp.Tool{Name: "charge"}, func(context.Context, *mcp.CallToolRequest, chargeIn) (*mcp.CallToolResult, any, error) {
		runs.Add(1)
		return nil, nil, idem.Unknown(errors.New("the card network timed out"))
	})
	sst, cst := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, sst, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, cst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); e.Close() })

	args := map[string]any{"amount": 500, idemmcp.KeyParam: "k-unknown"}
	for i := 1; i <= 2; i++ {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: args})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if msg := text(res); !res.IsError || !strings.Contains(msg, "is unknown") || !strings.Contains(msg, "Do not retry this action with a new key") {
			t.Fatalf("call %d = %q (error %v); want the unknown-outcome answer", i, msg, res.IsError)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once: its outcome is unknown, so a retry must not run it", n)
	}
	if rec, err := st.Get(ctx, "test", "k-unknown"); err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record = %+v, %v; want unknown", rec, err)
	}
}
