package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"time"

	"github.com/idemkit/idem/idemmcp/audit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cmdToolsAudit finds MCP tools that have side effects and no idempotency
// key: `idem tools-audit -- COMMAND [ARGS]` or `idem tools-audit --url URL`.
// Exit 3 when it finds one. The audit itself is idemmcp/audit's.
func cmdToolsAudit(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("tools-audit",
		"idem tools-audit [--json] [--timeout DUR] -- COMMAND [ARGS...]\n       idem tools-audit [--json] [--timeout DUR] --url URL",
		"Connects to an MCP server, lists its tools and flags every tool that is not\n"+
			"marked read-only (annotations.readOnlyHint) and has no idempotency key\n"+
			"parameter: an agent that retries such a tool repeats its side effect.\n\n"+
			"The server is started as COMMAND over stdio, or reached at URL over the\n"+
			"streamable HTTP transport. Its stderr is passed through to stderr.\n\n"+
			"Exit status: 0 clean, 3 at least one tool flagged, 1 the audit failed,\n"+
			"2 usage error.",
		"idem tools-audit -- go run ./examples/mcp-refunds -db /tmp/refunds.db\n  idem tools-audit --json --url http://127.0.0.1:8080/mcp")
	endpoint := f.String("url", "", "audit the streamable HTTP MCP endpoint at `URL`")
	asJSON := f.Bool("json", false, "print the report as JSON (audit.Report: server, tools with their verdicts, flagged; see docs/cli.md)")
	timeout := f.duration("timeout", 30*time.Second, "give up after this long")
	command, code, ok := f.parse(args)
	if !ok {
		return code
	}
	switch {
	case *endpoint != "" && len(command) > 0:
		return f.usageError("give either --url or a command after --, not both")
	case *endpoint == "" && len(command) == 0:
		return f.usageError("no server: give a command after -- or --url URL")
	case *timeout <= 0:
		return f.usageError("--timeout must be positive")
	}
	var transport mcp.Transport
	if *endpoint != "" {
		u, err := url.Parse(*endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return f.usageError("--url %q is not an http(s) URL", *endpoint)
		}
		transport = &mcp.StreamableClientTransport{Endpoint: *endpoint, DisableStandaloneSSE: true, MaxRetries: -1}
	} else {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stderr = e.stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := audit.Audit(ctx, transport)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timed out after %s)", err, *timeout)
		}
		return f.fail(err)
	}
	if *asJSON {
		err = rep.WriteJSON(e.stdout)
	} else {
		err = rep.WriteTable(e.stdout)
	}
	if err != nil {
		return f.fail(fmt.Errorf("write report: %w", err))
	}
	if !rep.Clean() {
		return exitFindings
	}
	return exitOK
}
