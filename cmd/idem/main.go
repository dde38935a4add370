// Command idem is the idem command line: an idempotency proxy for any HTTP
// API, the operator's tools for records (migrate, get, list, resolve,
// sweep, reconcile, doctor, and the ui dashboard), audits (audit of an HTTP API, vet of Go code,
// tools-audit of MCP servers), bench and version.
//
// Every command lives here, one file each, and follows one convention
// (cli.go): --flag syntax, flags before or after positional arguments
// ("--" ends them), --help with an example, a usage mistake reported in
// one line. Every command that prints a result takes --json; docs/cli.md
// documents each shape. The logic of the larger ones is in
// cmd/idem/internal (audit, bench, ui) or in the library they front
// (reconcile, idemmcp/audit, idemvet).
//
// Exit codes, defined once below: 0 ok, 1 failure, 2 usage (or a refusal
// to start); 3 findings: reconcile on drift or over-counts, doctor on
// something to fix in a store, audit on a failed check, vet on a finding,
// tools-audit on an unkeyed side-effecting tool.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes, the same for every command.
const (
	// exitOK: the command did what was asked and found nothing to fix.
	exitOK = 0
	// exitFailure: the command could not do it (a store, file or server
	// failed), or did only part of it.
	exitFailure = 1
	// exitUsage: the command line is wrong, or the command refuses to
	// start on what it was given (an unsafe store, a missing --sandbox).
	exitUsage = 2
	// exitFindings: the command ran and found something to fix (reconcile,
	// doctor, audit, vet, tools-audit).
	exitFindings = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is what a command may touch.
type env struct {
	stdout, stderr io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

var commands = map[string]command{
	"proxy":       {"make an HTTP API's mutating requests idempotent", cmdProxy},
	"migrate":     {"create or upgrade the store's schema (or print its SQL)", cmdMigrate},
	"get":         {"show one record", cmdGet},
	"list":        {"list records", cmdList},
	"resolve":     {"decide an unknown record as an operator", cmdResolve},
	"sweep":       {"delete expired records (never unknown ones)", cmdSweep},
	"reconcile":   {"compare records with a provider's settlement file or API (exit 3 on drift)", cmdReconcile},
	"audit":       {"audit an HTTP API's idempotency with real requests to a sandbox (exit 3 on a failed check)", cmdAudit},
	"tools-audit": {"report MCP tools with side effects and no idempotency key (exit 3)", cmdToolsAudit},
	"bench":       {"measure idem against the raw driver of the same store", cmdBench},
	"version":     {"print the module version, commit and Go version", cmdVersion},
	"ui":          {"serve the operator dashboard: unknown records, decisions, outcomes over time", cmdUI},
	"doctor":      {"check a store's schema, durability, clock and retention (exit 3 on findings)", cmdDoctor},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		topUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-version", "--version":
		printVersion(stdout, readVersion())
		return exitOK
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(ctx, e, []string{"--help"})
			}
		}
		topUsage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "idem: unknown command %q\nRun 'idem --help' for the commands.\n", args[0])
		return exitUsage
	}
	return c.run(ctx, e, args[1:])
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idem COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'idem COMMAND --help' for a command's flags and an example.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 failure, 2 usage; 3 when reconcile, doctor, audit, vet or tools-audit finds a problem.")
}
