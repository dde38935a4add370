package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/idemmcp/audit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serveEnv makes the test binary run the example server over stdio on the
// database file it names, so the server can be tested as a subprocess.
const serveEnv = "MCP_REFUNDS_TEST_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(serveEnv); path != "" {
		if err := serve(context.Background(), path, &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// start serves a fresh app over the SDK's in-memory transport.
func start(t *testing.T) (*app, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	a, err := newApp(ctx, filepath.Join(t.TempDir(), "refunds.db"))
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := a.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); a.Close() })
	return a, cs
}

func refundCall(key string, cents int) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "create_refund", Arguments: map[string]any{
		"charge_id": "ch_42", "amount_cents": cents, "currency": "EUR", "reason": "damaged", idemmcp.KeyParam: key,
	}}
}

// issue calls create_refund and returns the refund it reports.
func issue(t *testing.T, cs *mcp.ClientSession, key string, cents int) refund {
	t.Helper()
	res, err := cs.CallTool(context.Background(), refundCall(key, cents))
	return issued(t, res, err)
}

func issued(t *testing.T, res *mcp.CallToolResult, err error) refund {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("tool error: %s", b)
	}
	var r refund
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		t.Fatalf("no refund in %s", b)
	}
	return r
}

func refunds(t *testing.T, a *app) int {
	t.Helper()
	n, err := a.ledger.count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRetriedRefundIssuedOnce(t *testing.T) {
	a, cs := start(t)
	ctx := context.Background()
	first := issue(t, cs, "refund-ch42-1", 1250)
	for i := range 20 {
		res, err := cs.CallTool(ctx, refundCall("refund-ch42-1", 1250))
		if r := issued(t, res, err); r != first || res.Meta[idemmcp.MetaReplayed] != true {
			t.Fatalf("retry %d = %+v (replayed %v); want %+v", i, r, res.Meta[idemmcp.MetaReplayed], first)
		}
	}
	if n := refunds(t, a); n != 1 {
		t.Fatalf("%d refunds after 21 calls with one key, want 1", n)
	}
	second := issue(t, cs, "refund-ch42-2", 1250)
	if second.ID == first.ID || refunds(t, a) != 2 {
		t.Fatalf("a new key gave %s after %s; %d refunds", second.ID, first.ID, refunds(t, a))
	}
}

func TestConcurrentRetriesIssueOneRefund(t *testing.T) {
	a, cs := start(t)
	ctx := context.Background()
	got := make([]refund, 20)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, refundCall("refund-ch42-c", 990))
			if err == nil && !res.IsError {
				b, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &got[i])
			}
		})
	}
	wg.Wait()
	for i, r := range got {
		if r.ID == "" || r != got[0] {
			t.Fatalf("call %d got %+v, call 0 got %+v", i, r, got[0])
		}
	}
	if n := refunds(t, a); n != 1 {
		t.Fatalf("%d refunds from 20 concurrent calls with one key, want 1", n)
	}
}

func TestInvalidRefundLeavesKeyFree(t *testing.T) {
	a, cs := start(t)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, refundCall("refund-ch42-z", 0))
	if err != nil || !res.IsError {
		t.Fatalf("zero refund: %v, %+v", err, res)
	}
	issue(t, cs, "refund-ch42-z", 300)
	if n := refunds(t, a); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

func TestListRefundsIsReadOnly(t *testing.T) {
	_, cs := start(t)
	ctx := context.Background()
	issue(t, cs, "refund-ch42-l", 100)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_refunds", Arguments: map[string]any{"charge_id": "ch_42"}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "refund-ch42-l") {
		t.Fatalf("list_refunds: %v, %+v", err, res)
	}
}

func TestToolsAuditClean(t *testing.T) {
	t.Setenv(serveEnv, filepath.Join(t.TempDir(), "refunds.db")) // inherited by the server process
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := audit.Audit(ctx, &mcp.CommandTransport{Command: exec.Command(exe), TerminateDuration: 2 * time.Second})
	if err != nil || !rep.Clean() {
		t.Fatalf("tools-audit: %+v, %v; want clean", rep, err)
	}
	verdicts := map[string]string{}
	for _, f := range rep.Tools {
		verdicts[f.Name] = f.Reason
	}
	if verdicts["create_refund"] != "side effects keyed by required idempotency_key" || verdicts["list_refunds"] != "read-only" {
		t.Fatalf("verdicts = %v", verdicts)
	}
}
