package unkeyedtool

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type KeyedArgs struct {
	IdempotencyKey string `json:"idempotency_key"`
	ChargeID       string `json:"charge_id"`
}

func keyed(ctx context.Context, _ *mcp.CallToolRequest, in KeyedArgs) (*mcp.CallToolResult, Refund, error) {
	return nil, Refund{}, nil
}

func listRefunds(ctx context.Context, _ *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, []Refund, error) {
	return nil, nil, nil
}

func registerGood(s *mcp.Server, guard *idemmcp.Guard) {
	// The README: side-effecting through idemmcp, read-only marked.
	idemmcp.AddTool(guard, &mcp.Tool{Name: "create_refund"}, refund)
	idemmcp.AddTool(guard, &mcp.Tool{Name: "list_refunds",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, listRefunds)

	// Read-only on the SDK directly.
	mcp.AddTool(s, &mcp.Tool{Name: "get_balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, listRefunds)

	// Naturally idempotent (a set, not an add).
	mcp.AddTool(s, &mcp.Tool{Name: "set_status", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, refund)

	// Its own key parameter.
	mcp.AddTool(s, &mcp.Tool{Name: "create_payout"}, keyed)

	// A literal schema with an idempotency_key property.
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"idempotency_key": {Type: "string"},
	}, Required: []string{"idempotency_key"}}}, raw)
}

// A tool built elsewhere is not judged.
func registerBuilt(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, refund) }
