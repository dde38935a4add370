package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRetryAfterServerRestart: the agent's host restarts the server between
// the call and its retry. The record is in the SQLite file, so the retry
// replays the refund instead of issuing another.
func TestRetryAfterServerRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "refunds.db")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	callOnce := func() (*mcp.CallToolResult, []any) {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), serveEnv+"="+db)
		cmd.Stderr = os.Stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close() // stops the server process
		res, err := idemmcp.CallTool(ctx, cs, "conv-7", "toolu_7", refundCall("model-key", 4200))
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_refunds", Arguments: map[string]any{"charge_id": "ch_42"}})
		if err != nil || list.IsError {
			t.Fatalf("list_refunds: %v %+v", err, list)
		}
		rs, _ := list.StructuredContent.(map[string]any)["refunds"].([]any)
		return res, rs
	}
	first, _ := callOnce()
	again, rs := callOnce()
	r1, r2 := issued(t, first, nil), issued(t, again, nil)
	if r1 != r2 || again.Meta[idemmcp.MetaReplayed] != true {
		t.Fatalf("after restart: %+v (replayed %v), first %+v", r2, again.Meta[idemmcp.MetaReplayed], r1)
	}
	if len(rs) != 1 {
		t.Fatalf("%d refunds in the ledger after a retry across a restart, want 1", len(rs))
	}
}
