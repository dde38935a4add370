package idemmcp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serveEnv makes the test binary serve the fixture over stdio, so that the
// guard is tested through a real subprocess and the stdio transport.
const serveEnv = "IDEMMCP_TEST_SERVE_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if err := serveStdio(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func serveStdio() error {
	f, err := newFixture(idemmcp.FixedScope("stdio"), idem.Policy{InFlight: idem.InFlightReject})
	if err != nil {
		return err
	}
	// Test controls, added unguarded: wait until a hold call is running,
	// then let it finish.
	var once sync.Once
	mcp.AddTool(f.server, &mcp.Tool{Name: "wait_entered"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-f.entered
		return &mcp.CallToolResult{}, nil, nil
	})
	mcp.AddTool(f.server, &mcp.Tool{Name: "unhold"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		once.Do(func() { close(f.holding) })
		return &mcp.CallToolResult{}, nil, nil
	})
	return f.server.Run(context.Background(), &mcp.StdioTransport{})
}

func TestStdioSubprocess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callStdio := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	t.Run("replay", func(t *testing.T) {
		id := refundID(t, callStdio("create_refund", refund("s-1", 500)))
		again := callStdio("create_refund", refund("s-1", 500))
		if refundID(t, again) != id || !isReplay(again) {
			t.Fatalf("retry = %q", text(again))
		}
		if refundID(t, callStdio("create_refund", refund("s-2", 500))) == id {
			t.Fatal("a new key replayed the old refund")
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		res := callStdio("create_refund", refund("s-1", 999))
		if !res.IsError || !strings.Contains(text(res), "arguments that differ: amount") {
			t.Fatalf("mismatch = %q", text(res))
		}
	})
	t.Run("missing key", func(t *testing.T) {
		res := callStdio("create_refund", refund("", 500))
		if !res.IsError || !strings.Contains(text(res), `missing required parameter "idempotency_key"`) {
			t.Fatalf("missing key = %q", text(res))
		}
	})
	t.Run("runtime key wins", func(t *testing.T) {
		var ids []string
		for _, modelKey := range []string{"m-1", "m-2"} {
			res, err := idemmcp.CallTool(ctx, cs, "conv-9", "call-9", &mcp.CallToolParams{Name: "create_refund", Arguments: refund(modelKey, 500)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, refundID(t, res))
		}
		if ids[0] != ids[1] {
			t.Fatalf("runtime-keyed retries gave %v", ids)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		args := map[string]any{idemmcp.KeyParam: "s-hold"}
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: args})
			done <- res
		}()
		callStdio("wait_entered", nil)
		if dup := callStdio("hold", args); !dup.IsError || !strings.Contains(text(dup), "still running") {
			t.Fatalf("duplicate = %q", text(dup))
		}
		callStdio("unhold", nil)
		if first := <-done; first == nil || text(first) != "held 1" {
			t.Fatalf("first = %+v", first)
		}
		if again := callStdio("hold", args); !isReplay(again) || text(again) != "held 1" {
			t.Fatalf("after = %q", text(again))
		}
	})
	t.Run("read-only passthrough", func(t *testing.T) {
		a, b := callStdio("get_balance", nil), callStdio("get_balance", nil)
		if a.IsError || text(a) == text(b) || isReplay(b) {
			t.Fatalf("read-only = %q, %q", text(a), text(b))
		}
	})
}
