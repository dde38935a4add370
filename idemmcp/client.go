package idemmcp

import (
	"context"
	"maps"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callKeyNamespace namespaces keys derived by [CallKey].
const callKeyNamespace = "mcp-tool-call"

// CallKey derives the idempotency key of one tool call in an agent host:
// "mcp-tool-call:v1:<conversationID>:<toolCallID>". The tool-call id is the
// id the model gave this call (for example an OpenAI tool_call id or an
// Anthropic tool_use id), so the key is the same on every retry of that
// call and different for any other call. Both ids must be non-empty and the
// key at most 255 bytes; the parts are escaped so that different pairs never
// give the same key.
func CallKey(conversationID, toolCallID string) (idem.Key, error) {
	return idem.DeriveKey(callKeyNamespace, 1, conversationID, toolCallID)
}

// SetCallKey puts the key derived by [CallKey] into params' _meta under
// [MetaKey], where a guarded server prefers it to any key the model wrote.
// It copies params' _meta, so a params value shared with other calls is not
// changed.
func SetCallKey(params *mcp.CallToolParams, conversationID, toolCallID string) error {
	k, err := CallKey(conversationID, toolCallID)
	if err != nil {
		return err
	}
	m := maps.Clone(params.Meta)
	if m == nil {
		m = mcp.Meta{}
	}
	m[MetaKey] = string(k)
	params.Meta = m
	return nil
}

// CallTool calls a tool on cs with the key for (conversationID, toolCallID)
// in _meta. Call it again with the same ids to retry the same tool call: a
// guarded server replays the first outcome. params is not modified.
func CallTool(ctx context.Context, cs *mcp.ClientSession, conversationID, toolCallID string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	p := *params
	if err := SetCallKey(&p, conversationID, toolCallID); err != nil {
		return nil, err
	}
	return cs.CallTool(ctx, &p)
}
