package main

import (
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
)

// mcpFixtureEnv makes the test binary an MCP server on stdio (TestMain),
// so that tools-audit is tested against a real subprocess.
const mcpFixtureEnv = "IDEM_TOOLS_AUDIT_FIXTURE"

func serveMCPFixture(kind string) int {
	if err := mcpFixture(kind).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type refundArgs struct {
	Amount int64  `json:"amount"`
	Key    string `json:"idempotency_key"`
}

func noop[In any](context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{}, nil, nil
}

// mcpFixture is a server whose tools are all fine ("clean") or that also
// has an unkeyed side-effecting tool ("flagged").
func mcpFixture(kind string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "audit-fixture", Version: "v9"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get_balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, noop[struct{}])
	mcp.AddTool(s, &mcp.Tool{Name: "create_refund"}, noop[refundArgs])
	if kind == "flagged" {
		mcp.AddTool(s, &mcp.Tool{Name: "send_email"}, noop[struct {
			To string `json:"to"`
		}])
	}
	return s
}

// selfMCPServer returns the command line that starts this test binary as
// a fixture server.
func selfMCPServer(t *testing.T, kind string) []string {
	t.Setenv(mcpFixtureEnv, kind) // inherited by the child; forbids t.Parallel
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--", exe}
}

func TestToolsAuditSubprocessFlagged(t *testing.T) {
	out, errOut, code := runCLI(append([]string{"tools-audit"}, selfMCPServer(t, "flagged")...)...)
	if code != exitFindings {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitFindings, errOut)
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

// TestToolsAuditJSON: --json prints audit.Report (docs/cli.md), over stdio
// and over streamable HTTP.
func TestToolsAuditJSON(t *testing.T) {
	out, errOut, code := runCLI(append([]string{"tools-audit", "--json"}, selfMCPServer(t, "clean")...)...)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr: %s", code, errOut)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// The SDK lists tools by name.
	if rep.Server != "audit-fixture" || rep.Flagged != 0 || len(rep.Tools) != 2 || rep.Tools[0].KeyParam != "idempotency_key" || !rep.Tools[0].KeyRequired {
		t.Fatalf("report = %+v", rep)
	}

	srv := mcpFixture("flagged")
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	out, errOut, code = runCLI("tools-audit", "--json", "--url", ts.URL)
	if code != exitFindings {
		t.Fatalf("exit %d, want 3; stderr: %s", code, errOut)
	}
	rep = audit.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Flagged != 1 {
		t.Fatalf("report %+v, err %v", rep, err)
	}
}

func TestToolsAuditUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout for help, else in stderr
	}{
		{"help", []string{"--help"}, exitOK, "example:"},
		{"short help", []string{"-h"}, exitOK, "idem tools-audit -- "},
		{"nothing to audit", nil, exitUsage, "no server"},
		{"both url and command", []string{"--url", "http://x", "--", "srv"}, exitUsage, "not both"},
		{"unknown flag", []string{"--frobnicate"}, exitUsage, "frobnicate"},
		{"bad url", []string{"--url", "ftp://x"}, exitUsage, "not an http(s) URL"},
		{"bad timeout", []string{"--timeout", "0s", "--", "srv"}, exitUsage, "--timeout"},
		{"command not found", []string{"--", "/nonexistent/idem-mcp-server"}, exitFailure, "connect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCLI(append([]string{"tools-audit"}, tc.args...)...)
			got := errOut
			if tc.code == exitOK {
				got = out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d (want %d); stdout %q; stderr %q; want %q", code, tc.code, out, errOut, tc.want)
			}
		})
	}
}
