package idemmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/memstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDecisionReplays: a tool call left unknown and then decided outside
// the call (through idem.EncodeDecision, as reconciliation and idem
// resolve do) replays the decision as a tool result — the decider's
// result, or its body as text and structured content — or, failed, as a
// tool error saying why; the tool never runs again.
func TestDecisionReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "refunds", Version: "v1"}, nil)
	g, err := idemmcp.NewGuard(server, idemmcp.Config{Engine: eng, Scope: idemmcp.FixedScope("")})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	g.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return nil, idem.Unknown(errors.New("the bank timed out"))
		})
	sct, cct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, sct, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, cct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); eng.Close() })
	call := func(key string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{idemmcp.KeyParam: key}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	decide := func(key string, d idem.Decision) {
		t.Helper()
		if res := call(key); !res.IsError {
			t.Fatalf("first call %s: not an error", key)
		}
		rec, err := st.Get(ctx, "", key)
		if err != nil || rec.State != idem.StateUnknown || rec.Origin() != idemmcp.Origin {
			t.Fatalf("record %s: %+v, %v; want unknown, origin mcp", key, rec, err)
		}
		val, err := idem.EncodeDecision(rec, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Resolve(ctx, "", idem.Key(key), idem.Resolution{As: d.As, Result: val, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	text := func(res *mcp.CallToolResult) string {
		if len(res.Content) != 1 {
			return ""
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		if tc == nil {
			return ""
		}
		return tc.Text
	}
	decided := func(res *mcp.CallToolResult, as string) bool {
		return res.Meta[idemmcp.MetaReplayed] == true && res.Meta[idemmcp.MetaDecision] == as
	}

	decide("k-result", idem.Decision{As: idem.StateSucceeded, Body: []byte(`{"content":[{"type":"text","text":"refund r_1 made"}]}`)})
	if res := call("k-result"); res.IsError || text(res) != "refund r_1 made" || !decided(res, "succeeded") {
		t.Errorf("decided with a tool result: %+v", res)
	}
	body := `{"object":"idem.resolution","status":"applied","reference":"r_2"}`
	decide("k-body", idem.Decision{As: idem.StateSucceeded, Body: []byte(body)})
	res := call("k-body")
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || text(res) != body || !strings.Contains(string(sc), `"reference":"r_2"`) || !decided(res, "succeeded") {
		t.Errorf("decided with a JSON body: %+v (structured %s)", res, sc)
	}
	decide("k-failed", idem.Decision{As: idem.StateFailed, Message: "the bank declined it", Body: []byte(`{"problem":1}`)})
	if res := call("k-failed"); !res.IsError || text(res) != "the bank declined it" || !decided(res, "failed") {
		t.Errorf("decided failed: %+v", res)
	}
	if n := ran.Load(); n != 3 {
		t.Fatalf("the tool ran %d times for 3 keys", n)
	}
}
