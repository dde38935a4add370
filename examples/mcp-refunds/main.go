// Command mcp-refunds is an MCP server (stdio) whose create_refund tool
// issues each refund exactly once, however often an agent retries the call.
//
// The refunds ledger and idem's records live in one SQLite file. The tool is
// added through an idemmcp.Guard, so it takes a required idempotency_key
// (or a key supplied by the agent runtime in _meta), and a retry of the same
// call returns the recorded refund instead of refunding again. list_refunds
// is read-only and is registered unchanged.
//
//	go run ./examples/mcp-refunds -db refunds.db
//	idem tools-audit -- go run ./examples/mcp-refunds -db refunds.db
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	db := flag.String("db", "refunds.db", "SQLite file for the refunds ledger and idem's records")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := serve(ctx, *db, &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-refunds:", err)
		os.Exit(1)
	}
}

// serve runs the server on t until the client disconnects or ctx ends.
func serve(ctx context.Context, path string, t mcp.Transport) error {
	a, err := newApp(ctx, path)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.server.Run(ctx, t)
}
