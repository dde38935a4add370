package unkeyedtool

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type RefundArgs struct {
	ChargeID    string `json:"charge_id"`
	AmountCents int64  `json:"amount_cents"`
}

type Refund struct{ ID string }

func refund(ctx context.Context, _ *mcp.CallToolRequest, in RefundArgs) (*mcp.CallToolResult, Refund, error) {
	return nil, Refund{}, nil
}

func raw(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }

func register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "create_refund"}, refund) // want `MCP tool "create_refund" has no ReadOnlyHint and no idempotency key`

	// Annotated, but not read-only.
	mcp.AddTool(s, &mcp.Tool{Name: "send_email", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false}}, refund) // want `MCP tool "send_email"`

	// Built in a variable.
	t := &mcp.Tool{Name: "book_flight", Description: "books a flight"}
	mcp.AddTool(s, t, refund) // want `MCP tool "book_flight"`

	// The raw API with a literal schema that has no key.
	s.AddTool(&mcp.Tool{Name: "charge_card", // want `MCP tool "charge_card"`
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
			"amount": {Type: "integer"},
		}}}, raw)

	// A map schema without a key.
	s.AddTool(&mcp.Tool{Name: "post_message", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}, raw) // want `MCP tool "post_message"`

	// A function literal handler.
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_order"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct{ OrderID string }) (*mcp.CallToolResult, any, error) { // want `MCP tool "cancel_order"`
		return nil, nil, nil
	})
}
