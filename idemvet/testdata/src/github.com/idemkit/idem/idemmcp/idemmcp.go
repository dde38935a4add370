package idemmcp

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type Guard struct{}

func AddTool[In, Out any](g *Guard, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {}
