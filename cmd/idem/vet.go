package main

import (
	"context"

	"github.com/idemkit/idem/idemvet"
)

func init() {
	commands["vet"] = command{"find idempotency red flags in Go code, SQL and alert rules (exit 3)", cmdVet}
}

// cmdVet runs idem's analyzers over Go packages, their SQL migrations and
// Prometheus rules: `idem vet ./...`. Exit 3 when it finds something.
func cmdVet(_ context.Context, e *env, args []string) int {
	return idemvet.Main(args, e.stdout, e.stderr)
}
