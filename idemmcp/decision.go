package idemmcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Origin is the [idem.Intent] Origin a [Guard] writes with every claim:
// the record's result is a tool result (the JSON of an
// mcp.CallToolResult), a failed record's the JSON of a tool error result.
// A decision taken outside the call (reconciliation, a recovery hook,
// `idem resolve`) must be written by [EncodeDecision], which this package
// registers for Origin, so that [idem.EncodeDecision] finds it.
const Origin = "mcp"

// MetaDecision is set in the _meta of a result replayed from a decision
// taken outside the call, to the decision: "succeeded" or "failed".
const MetaDecision = "io.github.idemkit/decision"

func init() {
	idem.RegisterDecisionEncoder(Origin, idem.DecisionEncoderFunc(EncodeDecision))
}

// EncodeDecision encodes d as the tool result a record the guard made
// replays, with _meta[MetaDecision]:
//
//   - succeeded: d.Body when it is a tool result (a JSON object with a
//     "content" array); otherwise a result whose text is d.Body (or
//     d.Message when there is no body), with d.Body as its
//     structuredContent when it is a JSON object — reconciliation's
//     record of the provider's entry, for one;
//   - failed: a tool error result whose text is d.Message (or d.Body when
//     there is no message), so the model reads why.
//
// d.Status and d.ContentType do not apply.
func EncodeDecision(d idem.Decision) ([]byte, error) {
	res := &mcp.CallToolResult{}
	switch {
	case d.As == idem.StateFailed:
		text := d.Message
		if strings.TrimSpace(text) == "" {
			text = string(d.Body)
		}
		if strings.TrimSpace(text) == "" {
			text = "this call was decided as failed after its outcome was lost; call again with a new idempotency key to try again"
		}
		res = toolError(text)
	case isToolResult(d.Body):
		if err := json.Unmarshal(d.Body, res); err != nil {
			return nil, fmt.Errorf("idemmcp: decision body: %w", err)
		}
	default:
		text := string(d.Body)
		if len(d.Body) == 0 {
			text = d.Message
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
		if trimmed := bytes.TrimSpace(d.Body); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
			res.StructuredContent = json.RawMessage(trimmed)
		}
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaDecision] = string(d.As)
	return json.Marshal(res)
}

// isToolResult reports whether b is a JSON object with a "content" array:
// a tool result as an operator would write one.
func isToolResult(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	c := bytes.TrimSpace(m["content"])
	return len(c) > 0 && c[0] == '['
}
