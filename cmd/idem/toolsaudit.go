package main

import (
	"context"

	"github.com/idemkit/idem/idemmcp/audit"
)

// cmdToolsAudit finds MCP tools that have side effects and no idempotency
// key: `idem tools-audit -- COMMAND [ARGS]` or `idem tools-audit --url URL`.
// Exit 3 when it finds one.
func cmdToolsAudit(_ context.Context, e *env, args []string) int {
	return audit.RunToolsAudit(args, e.stdout, e.stderr)
}
