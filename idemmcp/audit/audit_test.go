package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemmcp/audit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serverEnv makes the test binary act as an MCP server on stdio, so that
// RunToolsAudit can be tested against a real subprocess.
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

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = audit.RunToolsAudit(args, &o, &e)
	return code, o.String(), e.String()
}

// selfServer returns the command line that starts this test binary as a
// fixture server.
func selfServer(t *testing.T, kind string) []string {
	t.Setenv(serverEnv, kind) // inherited by the child; forbids t.Parallel
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--", exe}
}

func TestRunToolsAuditSubprocessFlagged(t *testing.T) {
	code, out, errOut := run(t, selfServer(t, "flagged")...)
	if code != audit.ExitFlagged {
		t.Fatalf("exit %d, want %d; stderr: %s", code, audit.ExitFlagged, errOut)
	}
	var flagLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FLAG") {
			flagLine = l
		}
	}
	if !strings.Contains(flagLine, "send_email") || strings.Count(out, "FLAG") != 1 {
		t.Fatalf("table does not flag exactly send_email:\n%s", out)
	}
	if !strings.Contains(out, "audit-fixture v9: 3 tools, 1 flagged") {
		t.Fatalf("summary missing:\n%s", out)
	}
}

func TestRunToolsAuditSubprocessCleanJSON(t *testing.T) {
	code, out, errOut := run(t, append([]string{"--json"}, selfServer(t, "clean")...)...)
	if code != audit.ExitClean {
		t.Fatalf("exit %d, want 0; stderr: %s", code, errOut)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// The SDK lists tools by name.
	if rep.Flagged != 0 || len(rep.Tools) != 2 || rep.Tools[0].KeyParam != "idempotency_key" || !rep.Tools[0].KeyRequired {
		t.Fatalf("report = %+v", rep)
	}
}

func TestRunToolsAuditHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer("flagged")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	code, out, errOut := run(t, "--json", "--url", ts.URL)
	if code != audit.ExitFlagged {
		t.Fatalf("exit %d, want 3; stderr: %s", code, errOut)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Flagged != 1 {
		t.Fatalf("report %+v, err %v", rep, err)
	}
}

func TestRunToolsAuditUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout for help, else in stderr
	}{
		{"help", []string{"--help"}, audit.ExitClean, "example:"},
		{"short help", []string{"-h"}, audit.ExitClean, "idem tools-audit -- "},
		{"nothing to audit", nil, audit.ExitUsage, "no server"},
		{"both url and command", []string{"--url", "http://x", "--", "srv"}, audit.ExitUsage, "not both"},
		{"unknown flag", []string{"--frobnicate"}, audit.ExitUsage, "frobnicate"},
		{"bad url", []string{"--url", "ftp://x"}, audit.ExitUsage, "not an http(s) URL"},
		{"bad timeout", []string{"--timeout", "0s", "--", "srv"}, audit.ExitUsage, "--timeout"},
		{"command not found", []string{"--", "/nonexistent/idem-mcp-server"}, audit.ExitFailure, "connect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tc.args...)
			got := errOut
			if tc.code == audit.ExitClean {
				got = out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d (want %d); stdout %q; stderr %q; want %q", code, tc.code, out, errOut, tc.want)
			}
		})
	}
}
