package mcp

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
)

type Implementation struct{ Name string }

type Server struct{}

func NewServer(i *Implementation, o any) *Server { return &Server{} }

type ToolAnnotations struct {
	ReadOnlyHint    bool
	DestructiveHint *bool
	IdempotentHint  bool
}

type Tool struct {
	Name        string
	Description string
	InputSchema any
	Annotations *ToolAnnotations
}

type CallToolRequest struct{}
type CallToolResult struct{}

type ToolHandler func(context.Context, *CallToolRequest) (*CallToolResult, error)

type ToolHandlerFor[In, Out any] func(context.Context, *CallToolRequest, In) (*CallToolResult, Out, error)

func (s *Server) AddTool(t *Tool, h ToolHandler) {}

func AddTool[In, Out any](s *Server, t *Tool, h ToolHandlerFor[In, Out]) {}

var _ = jsonschema.Schema{}
