package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemmcp/audit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serverEnv makes the test binary act as an MCP server on stdio, so that
// Audit can be tested against a real subprocess.
const serverEnv = "IDEMMCP_AUDIT_TEST_SERVER"

func TestMain(m *testing.M) {
	if kind := os.Getenv(serverEnv); kind != "" {
		if err := newServer(kind).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type empty struct{}

type refundArgs struct {
	Amount int64  `json:"amount"`
	Key    string `json:"idempotency_key"`
}

func handler[In any](context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{}, nil, nil
}

// newServer returns a server whose tools are all fine ("clean") or that also
// has an unkeyed side-effecting tool ("flagged").
func newServer(kind string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "audit-fixture", Version: "v9"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get_balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, handler[empty])
	mcp.AddTool(s, &mcp.Tool{Name: "create_refund"}, handler[refundArgs])
	if kind == "flagged" {
		mcp.AddTool(s, &mcp.Tool{Name: "send_email"}, handler[struct {
			To string `json:"to"`
		}])
	}
	return s
}

func TestJudge(t *testing.T) {
	t.Parallel()
	obj := func(required []any, props ...string) map[string]any {
		p := map[string]any{}
		for _, n := range props {
			p[n] = map[string]any{"type": "string"}
		}
		return map[string]any{"type": "object", "properties": p, "required": required}
	}
	tests := []struct {
		name    string
		tool    mcp.Tool
		flagged bool
		key     string
		req     bool
	}{
		{"read-only", mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, InputSchema: obj(nil, "q")}, false, "", false},
		{"unannotated, no key", mcp.Tool{InputSchema: obj(nil, "to")}, true, "", false},
		{"idempotentHint, no key", mcp.Tool{Annotations: &mcp.ToolAnnotations{IdempotentHint: true}, InputSchema: obj(nil)}, true, "", false},
		{"no schema", mcp.Tool{}, true, "", false},
		{"required snake key", mcp.Tool{InputSchema: obj([]any{"idempotency_key"}, "idempotency_key", "amount")}, false, "idempotency_key", true},
		{"optional camel key", mcp.Tool{InputSchema: obj(nil, "idempotencyKey")}, false, "idempotencyKey", false},
		{"near miss is not a key", mcp.Tool{InputSchema: obj(nil, "idempotency", "key")}, true, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.tool.Name = "t"
			f := audit.Judge(&tc.tool)
			if f.Flagged != tc.flagged || f.KeyParam != tc.key || f.KeyRequired != tc.req {
				t.Fatalf("Judge = %+v; want flagged=%v key=%q required=%v", f, tc.flagged, tc.key, tc.req)
			}
			if f.Reason == "" {
				t.Fatal("empty reason")
			}
		})
	}
}

func TestAuditInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := newServer("flagged").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	rep, err := audit.Audit(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Server != "audit-fixture" || rep.ServerVersion != "v9" || len(rep.Tools) != 3 || rep.Flagged != 1 || rep.Clean() {
		t.Fatalf("report = %+v", rep)
	}
	for _, f := range rep.Tools {
		if f.Flagged != (f.Name == "send_email") {
			t.Errorf("%s: flagged = %v", f.Name, f.Flagged)
		}
	}
}

// selfServer returns a command that starts this test binary as a fixture
// server.
func selfServer(t *testing.T, kind string) *exec.Cmd {
	t.Setenv(serverEnv, kind) // inherited by the child; forbids t.Parallel
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(exe)
}

// TestAuditSubprocess: a server started as a command, over stdio, as idem
// tools-audit runs it.
func TestAuditSubprocess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := audit.Audit(ctx, &mcp.CommandTransport{Command: selfServer(t, "flagged"), TerminateDuration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	var flagLine string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "FLAG") {
			flagLine = l
		}
	}
	if !strings.Contains(flagLine, "send_email") || strings.Count(out.String(), "FLAG") != 1 {
		t.Fatalf("table does not flag exactly send_email:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "audit-fixture v9: 3 tools, 1 flagged") {
		t.Fatalf("summary missing:\n%s", out.String())
	}
}

// TestAuditHTTPJSON: a server over streamable HTTP, its report as JSON.
func TestAuditHTTPJSON(t *testing.T) {
	t.Parallel()
	srv := newServer("clean")
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	rep, err := audit.Audit(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var got audit.Report
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	// The SDK lists tools by name.
	if got.Flagged != 0 || len(got.Tools) != 2 || got.Tools[0].KeyParam != "idempotency_key" || !got.Tools[0].KeyRequired {
		t.Fatalf("report = %+v", got)
	}
}
