package idemmcp

import (
	"fmt"
	"strings"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The texts below are read by a model deciding what to do next, so each one
// says what happened and what to do, and none suggests a new key where a
// new key would repeat the action.

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func missingKeyError() *mcp.CallToolResult {
	return toolError(fmt.Sprintf("missing required parameter %q: this tool has side effects. "+
		"Pass a new unique %s (for example a UUID) for a new action, and the same %s when you retry the same action.",
		KeyParam, KeyParam, KeyParam))
}

func invalidKeyError(err error) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("invalid parameter %q (%v): use 1 to %d printable ASCII characters, for example a UUID.",
		KeyParam, err, idem.MaxKeyLen))
}

func inFlightError(key idem.Key, e *idem.InFlightError) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("an earlier call with %s %q is still running. Wait about %s, then retry with the same %s "+
		"and the same arguments to get its result. Do not switch to a new key: that would perform the action a second time.",
		KeyParam, key, e.RetryAfter, KeyParam))
}

// mismatchError answers a call whose key was used for another call: to
// another tool, or with the arguments diff names (none in the global
// scope, or when the record's digests cannot be compared).
func mismatchError(in *parsedCall, tool string, diff []string, e *idem.MismatchError) *mcp.CallToolResult {
	var prevTool string
	if e.Record != nil {
		if intent, err := idem.DecodeIntent(e.Record.Intent); err == nil && intent != nil {
			prevTool = intent.Fields[intentToolField]
		}
	}
	var what string
	switch {
	case prevTool != "" && prevTool != tool:
		what = fmt.Sprintf("for a call to the tool %q", prevTool)
	case prevTool != "":
		if len(diff) > 0 {
			what = fmt.Sprintf("with different arguments (arguments that differ: %s)", strings.Join(diff, ", "))
		}
	}
	if what == "" {
		what = "with different arguments"
	}
	return toolError(fmt.Sprintf("%s %q was already used %s. A key identifies one action: "+
		"to retry that action, send exactly its arguments; for a new action, use a new %s.", KeyParam, in.key, what, KeyParam))
}

func unknownError(key idem.Key) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("the outcome of the earlier call with %s %q is unknown: it may or may not have taken effect, "+
		"and it is being reconciled. Do not retry this action with a new key; tell the user, or check its effect with a read-only tool.",
		KeyParam, key))
}

func unavailableError(key idem.Key) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("the action could not be started because a service is temporarily unavailable. "+
		"Retry later with the same %s %q and the same arguments.", KeyParam, key))
}
