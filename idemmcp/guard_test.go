package idemmcp_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves f over the SDK's in-memory transport and returns a client
// session.
func connect(t *testing.T, f *fixture) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := f.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); f.engine.Close() })
	return cs
}

func newConnected(t *testing.T, pol idem.Policy) (*fixture, *mcp.ClientSession) {
	t.Helper()
	f, err := newFixture(idemmcp.FixedScope("test"), pol)
	if err != nil {
		t.Fatal(err)
	}
	return f, connect(t, f)
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func isReplay(res *mcp.CallToolResult) bool { return res.Meta[idemmcp.MetaReplayed] == true }

func refundID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	var out struct {
		RefundID string `json:"refund_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.RefundID == "" {
		t.Fatalf("no refund id in %s", b)
	}
	return out.RefundID
}

func refund(key string, amount int) map[string]any {
	m := map[string]any{"charge_id": "ch_1", "amount": amount}
	if key != "" {
		m[idemmcp.KeyParam] = key
	}
	return m
}

func TestKeyedSchemaAndAnnotations(t *testing.T) {
	t.Parallel()
	before := refundTool
	beforeAnn := *refundTool.Annotations
	_, cs := newConnected(t, idem.Policy{})
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = tool
	}
	for _, name := range []string{"create_refund", "send_email", "hold"} {
		tool := tools[name]
		schema := tool.InputSchema.(map[string]any)
		prop, _ := schema["properties"].(map[string]any)[idemmcp.KeyParam].(map[string]any)
		if prop["type"] != "string" || !strings.Contains(prop["description"].(string), "same key") {
			t.Errorf("%s: key property = %v", name, prop)
		}
		if !slices.Contains(schema["required"].([]any), any(idemmcp.KeyParam)) {
			t.Errorf("%s: key not required: %v", name, schema["required"])
		}
		if a := tool.Annotations; a == nil || a.ReadOnlyHint || !a.IdempotentHint {
			t.Errorf("%s: annotations = %+v", name, a)
		}
	}
	if a := tools["create_refund"].Annotations; a.Title != "Refund" || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("create_refund lost its own annotations: %+v", a)
	}
	ro := tools["get_balance"]
	if props := ro.InputSchema.(map[string]any)["properties"]; props != nil {
		if _, ok := props.(map[string]any)[idemmcp.KeyParam]; ok {
			t.Error("read-only tool got a key parameter")
		}
	}
	if a := ro.Annotations; !a.ReadOnlyHint || a.IdempotentHint {
		t.Errorf("read-only tool annotations changed: %+v", a)
	}
	if !reflect.DeepEqual(before, refundTool) || !reflect.DeepEqual(beforeAnn, *refundTool.Annotations) || refundTool.InputSchema != nil {
		t.Error("AddTool modified the caller's tool")
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	first := call(t, cs, "create_refund", refund("k1", 500))
	id := refundID(t, first)
	if isReplay(first) {
		t.Fatal("first call marked as replay")
	}
	for range 5 {
		again := call(t, cs, "create_refund", refund("k1", 500))
		if got := refundID(t, again); got != id || !isReplay(again) || text(again) != text(first) {
			t.Fatalf("retry = %s (%q, replay %v); want %s", got, text(again), isReplay(again), id)
		}
	}
	if n := f.refunds.Load(); n != 1 {
		t.Fatalf("%d refunds for one key, want 1", n)
	}
	if id2 := refundID(t, call(t, cs, "create_refund", refund("k2", 500))); id2 == id || f.refunds.Load() != 2 {
		t.Fatalf("new key gave %s after %s with %d refunds", id2, id, f.refunds.Load())
	}
}

func TestReplayToolError(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	args := refund("k-fail", 500)
	args["fail"] = true
	first := call(t, cs, "create_refund", args)
	again := call(t, cs, "create_refund", args)
	if !first.IsError || !again.IsError || text(first) != text(again) || !strings.Contains(text(first), "bounced") {
		t.Fatalf("first %q, again %q", text(first), text(again))
	}
	if !isReplay(again) || f.refunds.Load() != 1 {
		t.Fatalf("replay %v, %d effects", isReplay(again), f.refunds.Load())
	}
	rec, err := f.store.Get(context.Background(), "test", "k-fail")
	if err != nil || rec.State != idem.StateFailed {
		t.Fatalf("record %+v, %v; want failed", rec, err)
	}
}

func TestReleasedHandlerErrorFreesKey(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	args := refund("k-rel", 500)
	args["release"] = true
	if res := call(t, cs, "create_refund", args); !res.IsError || !strings.Contains(text(res), "refused") {
		t.Fatalf("released call = %q", text(res))
	}
	delete(args, "release")
	if res := call(t, cs, "create_refund", args); isReplay(res) || refundID(t, res) != "rf_1" || f.refunds.Load() != 1 {
		t.Fatalf("retry after release = %q (replay %v)", text(res), isReplay(res))
	}
}

func TestInFlight(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{InFlight: idem.InFlightReject})
	args := map[string]any{idemmcp.KeyParam: "k-hold"}
	done := make(chan *mcp.CallToolResult)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold", Arguments: args})
		done <- res
	}()
	<-f.entered // the first call holds the key
	dup := call(t, cs, "hold", args)
	msg := text(dup)
	if !dup.IsError || !strings.Contains(msg, "still running") || !strings.Contains(msg, "same idempotency_key") || !strings.Contains(msg, "Do not switch to a new key") {
		t.Fatalf("in-flight duplicate = %q", msg)
	}
	close(f.holding)
	first := <-done
	if first == nil || first.IsError || text(first) != "held 1" {
		t.Fatalf("first = %+v", first)
	}
	if after := call(t, cs, "hold", args); !isReplay(after) || text(after) != "held 1" || f.holds.Load() != 1 {
		t.Fatalf("after = %q, %d effects", text(after), f.holds.Load())
	}
}

func TestConcurrentRetriesOneEffect(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{InFlight: idem.InFlightWait})
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_refund", Arguments: refund("k-conc", 700)})
			if err == nil && !res.IsError {
				ids[i] = refundID(t, res)
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id != "rf_1" {
			t.Fatalf("call %d got %q, want rf_1", i, id)
		}
	}
	if n := f.refunds.Load(); n != 1 {
		t.Fatalf("%d refunds from 20 concurrent retries, want 1", n)
	}
}

func TestMismatch(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	refundID(t, call(t, cs, "create_refund", refund("k-mm", 500)))
	res := call(t, cs, "create_refund", refund("k-mm", 900))
	msg := text(res)
	if !res.IsError || !strings.Contains(msg, "already used") || !strings.Contains(msg, "arguments that differ: amount") || strings.Contains(msg, "charge_id") {
		t.Fatalf("mismatch = %q", msg)
	}
	other := call(t, cs, "send_email", map[string]any{"to": "a@example.com", idemmcp.KeyParam: "k-mm"})
	if !other.IsError || !strings.Contains(text(other), `tool "create_refund"`) {
		t.Fatalf("cross-tool mismatch = %q", text(other))
	}
	if f.refunds.Load() != 1 || f.emails.Load() != 0 {
		t.Fatalf("effects ran on mismatch: %d refunds, %d emails", f.refunds.Load(), f.emails.Load())
	}
}

func TestMissingAndInvalidKey(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	tests := []struct {
		name string
		key  any
		want string
	}{
		{"missing", nil, `missing required parameter "idempotency_key"`},
		{"empty", "", `invalid parameter "idempotency_key"`},
		{"control byte", "a\nb", `invalid parameter "idempotency_key"`},
		{"too long", strings.Repeat("k", 256), `invalid parameter "idempotency_key"`},
		{"not a string", 42, `parameter "idempotency_key" must be a string`},
	}
	for _, tc := range tests {
		args := refund("", 500)
		if tc.key != nil {
			args[idemmcp.KeyParam] = tc.key
		}
		res := call(t, cs, "create_refund", args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s: %q; want %q", tc.name, text(res), tc.want)
		}
	}
	if n := f.refunds.Load(); n != 0 {
		t.Fatalf("%d refunds without a valid key", n)
	}
}

func TestInvalidArgumentsLeaveKeyFree(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	bad := refund("k-bad", 0)
	bad["amount"] = "five hundred" // refused by the schema: the handler never runs
	if res := call(t, cs, "create_refund", bad); !res.IsError || !strings.Contains(text(res), "amount") {
		t.Fatalf("bad arguments = %q", text(res))
	}
	// The model corrects its arguments and retries with the same key: that is
	// the first run of the action, not a mismatch.
	if res := call(t, cs, "create_refund", refund("k-bad", 500)); refundID(t, res) != "rf_1" || isReplay(res) {
		t.Fatalf("corrected call = %q", text(res))
	}
	if f.refunds.Load() != 1 {
		t.Fatalf("%d refunds", f.refunds.Load())
	}
}

func TestRuntimeKeyWins(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	ctx := context.Background()
	runtimeKey, err := idemmcp.CallKey("conv-1", "toolu_01")
	if err != nil {
		t.Fatal(err)
	}
	// The model invents a different key on each retry; the runtime's key,
	// derived from its tool-call id, is stable and wins.
	var ids []string
	for i, modelKey := range []string{"model-a", "model-b", ""} {
		res, err := idemmcp.CallTool(ctx, cs, "conv-1", "toolu_01", &mcp.CallToolParams{Name: "create_refund", Arguments: refund(modelKey, 500)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, refundID(t, res))
		if i > 0 && !isReplay(res) {
			t.Fatalf("retry %d with model key %q was not a replay", i, modelKey)
		}
	}
	if ids[0] != ids[1] || ids[1] != ids[2] || f.refunds.Load() != 1 {
		t.Fatalf("ids %v, %d refunds", ids, f.refunds.Load())
	}
	if keys := f.keys(); len(keys) != 1 || keys[0] != string(runtimeKey) {
		t.Fatalf("handler saw keys %v, want [%s]", keys, runtimeKey)
	}
	// The model's key alone is another intent.
	if id := refundID(t, call(t, cs, "create_refund", refund("model-a", 500))); id == ids[0] {
		t.Fatal("model key alone replayed the runtime-keyed call")
	}
	// A malformed runtime key is the runtime's bug: a protocol error.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_refund", Arguments: refund("x", 500), Meta: mcp.Meta{idemmcp.MetaKey: 7}})
	if err == nil || !strings.Contains(err.Error(), idemmcp.MetaKey) {
		t.Fatalf("non-string runtime key: %v", err)
	}
}

func TestReadOnlyPassthrough(t *testing.T) {
	t.Parallel()
	f, cs := newConnected(t, idem.Policy{})
	a, b := call(t, cs, "get_balance", nil), call(t, cs, "get_balance", nil)
	if text(a) != "read 1" || text(b) != "read 2" || isReplay(b) {
		t.Fatalf("read-only calls = %q, %q", text(a), text(b))
	}
	recs, err := f.store.List(context.Background(), idem.ListFilter{})
	if err != nil || len(recs) != 0 {
		t.Fatalf("read-only calls wrote %d records (%v)", len(recs), err)
	}
}

func TestPrincipalScope(t *testing.T) {
	t.Parallel()
	f, err := newFixture(nil, idem.Policy{}) // default: the authenticated principal
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, f)
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_refund", Arguments: refund("k", 500)})
	if err == nil || !strings.Contains(err.Error(), "no authenticated principal") || f.refunds.Load() != 0 {
		t.Fatalf("unauthenticated call: %v, %d refunds", err, f.refunds.Load())
	}
	req := &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: "alice"}}}
	if s, err := idemmcp.PrincipalScope(context.Background(), req); err != nil || s != "user:alice" {
		t.Fatalf("PrincipalScope = %q, %v", s, err)
	}
}

func TestNewGuardRequiresEngine(t *testing.T) {
	t.Parallel()
	if _, err := idemmcp.NewGuard(mcp.NewServer(&mcp.Implementation{Name: "x"}, nil), idemmcp.Config{}); err == nil {
		t.Fatal("NewGuard without an engine succeeded")
	}
}
