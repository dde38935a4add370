package audit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exit codes of [RunToolsAudit].
const (
	// ExitClean: every tool is read-only or keyed.
	ExitClean = 0
	// ExitFailure: the audit could not run (connection, listing, output).
	ExitFailure = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitFlagged: at least one tool is side-effecting and unkeyed.
	ExitFlagged = 3
)

const usage = `usage: idem tools-audit [--json] [--timeout D] -- COMMAND [ARGS...]
       idem tools-audit [--json] [--timeout D] --url URL

Connects to an MCP server, lists its tools and flags every tool that is not
marked read-only (annotations.readOnlyHint) and has no idempotency key
parameter: an agent that retries such a tool repeats its side effect.

The server is started as COMMAND over stdio, or reached at URL over the
streamable HTTP transport. Its stderr is passed through to stderr.

flags:
  --url URL     audit the streamable HTTP MCP endpoint at URL
  --json        print the report as JSON instead of a table
  --timeout D   give up after D (default 30s)
  --help        print this help

Exit status: 0 clean, 3 at least one tool flagged, 1 the audit failed,
2 usage error.

example:
  idem tools-audit -- go run ./examples/mcp-refunds -db /tmp/refunds.db
  idem tools-audit --json --url http://127.0.0.1:8080/mcp
`

// RunToolsAudit runs the `idem tools-audit` command with args (the
// arguments after the subcommand name) and returns its exit status. The
// report goes to stdout; errors, and the audited command's stderr, go to
// stderr.
func RunToolsAudit(args []string, stdout, stderr io.Writer) int {
	opts, code := parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	rep, err := Audit(ctx, opts.transport(stderr))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (timed out after %s)", err, opts.timeout)
		}
		fmt.Fprintf(stderr, "idem tools-audit: %v\n", err)
		return ExitFailure
	}
	if opts.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idem tools-audit: write report: %v\n", err)
		return ExitFailure
	}
	if !rep.Clean() {
		return ExitFlagged
	}
	return ExitClean
}

type options struct {
	url     string
	command []string
	json    bool
	timeout time.Duration
}

func (o *options) transport(stderr io.Writer) mcp.Transport {
	if o.url != "" {
		return &mcp.StreamableClientTransport{Endpoint: o.url, DisableStandaloneSSE: true, MaxRetries: -1}
	}
	cmd := exec.Command(o.command[0], o.command[1:]...)
	cmd.Stderr = stderr
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// parseArgs returns the options, or an exit code (>= 0) when the command
// should stop here (help, usage error).
func parseArgs(args []string, stdout, stderr io.Writer) (*options, int) {
	o := &options{}
	fs := flag.NewFlagSet("idem tools-audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, in one line
	fs.Usage = func() {}     // help goes to stdout, below
	fs.StringVar(&o.url, "url", "", "streamable HTTP endpoint")
	fs.BoolVar(&o.json, "json", false, "JSON output")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "overall timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil, ExitClean
		}
		return nil, usageError(stderr, strings.Replace(err.Error(), ": -", ": --", 1))
	}
	o.command = fs.Args()
	switch {
	case o.url != "" && len(o.command) > 0:
		return nil, usageError(stderr, "give either --url or a command after --, not both")
	case o.url == "" && len(o.command) == 0:
		return nil, usageError(stderr, "no server: give a command after -- or --url URL")
	case o.timeout <= 0:
		return nil, usageError(stderr, "--timeout must be positive")
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError(stderr, fmt.Sprintf("--url %q is not an http(s) URL", o.url))
		}
	}
	return o, -1
}

// usageError reports a usage mistake in one line and where the help is.
func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "idem tools-audit: %s\nRun 'idem tools-audit --help' for usage.\n", msg)
	return ExitUsage
}
