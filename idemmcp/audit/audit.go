// Package audit finds the agent-tool red flag in any MCP server: a tool that
// is not marked read-only and takes no idempotency key, so an agent that
// retries it (after a timeout, a re-plan, a host restart) repeats its side
// effect.
//
// [Audit] connects to a server over any MCP transport, lists its tools and
// judges each one; [Report.WriteTable] and [Report.WriteJSON] render the
// result. The `idem tools-audit` command (cmd/idem) runs it.
//
// A tool is flagged when its annotations do not say readOnlyHint: true and
// its input schema has no idempotency key property. A property counts as a
// key when its name, with '_' and '-' removed and lower-cased, is
// "idempotencykey" (idempotency_key, idempotencyKey, Idempotency-Key). A
// tool that declares idempotentHint: true but has no key is still flagged:
// the hint is a claim the server makes, not a mechanism, and only a
// naturally idempotent tool (one that sets a value) may rightly carry it.
// Annotations are hints from the server; the audit reports what a server
// declares, it cannot prove what a tool does.
package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is reported to audited servers as the client version.
const Version = "v0.1.0"

// Report is the outcome of one audit.
type Report struct {
	// Server names the audited server as it introduced itself.
	Server string `json:"server"`
	// ServerVersion is the version it reported, if any.
	ServerVersion string `json:"server_version,omitempty"`
	// Tools holds one finding per tool, in the order the server listed them.
	Tools []Finding `json:"tools"`
	// Flagged counts the findings with Flagged set.
	Flagged int `json:"flagged"`
}

// Clean reports whether no tool was flagged.
func (r *Report) Clean() bool { return r.Flagged == 0 }

// Finding is the verdict on one tool.
type Finding struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// ReadOnly is the tool's readOnlyHint.
	ReadOnly bool `json:"read_only"`
	// IdempotentHint is the tool's idempotentHint.
	IdempotentHint bool `json:"idempotent_hint"`
	// Annotated is false when the tool has no annotations at all, so every
	// hint took its protocol default (not read-only).
	Annotated bool `json:"annotated"`
	// KeyParam is the idempotency key property found in the input schema,
	// or empty.
	KeyParam string `json:"key_param,omitempty"`
	// KeyRequired reports whether KeyParam is listed as required.
	KeyRequired bool `json:"key_required,omitempty"`
	// Flagged is true for the red flag: not read-only and no key.
	Flagged bool `json:"flagged"`
	// Reason says why the tool was or was not flagged.
	Reason string `json:"reason"`
}

// Audit connects to the MCP server behind transport, lists all its tools
// (following pagination) and judges each one. ctx bounds the whole audit,
// including the connection. The session is closed before Audit returns.
func Audit(ctx context.Context, transport mcp.Transport) (Report, error) {
	if transport == nil {
		return Report{}, errors.New("audit: transport is nil")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "idem-tools-audit", Version: Version}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return Report{}, fmt.Errorf("audit: connect: %w", err)
	}
	defer cs.Close()
	var rep Report
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		rep.Server, rep.ServerVersion = ir.ServerInfo.Name, ir.ServerInfo.Version
	}
	rep.Tools = []Finding{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return Report{}, fmt.Errorf("audit: list tools: %w", err)
		}
		f := Judge(tool)
		if f.Flagged {
			rep.Flagged++
		}
		rep.Tools = append(rep.Tools, f)
	}
	return rep, nil
}

// Judge returns the verdict on one tool as listed by a server.
func Judge(t *mcp.Tool) Finding {
	f := Finding{Name: t.Name}
	if a := t.Annotations; a != nil {
		f.Annotated, f.ReadOnly, f.IdempotentHint = true, a.ReadOnlyHint, a.IdempotentHint
	}
	f.KeyParam, f.KeyRequired = keyParam(t.InputSchema)
	switch {
	case f.ReadOnly:
		f.Reason = "read-only"
	case f.KeyParam != "" && f.KeyRequired:
		f.Reason = "side effects keyed by required " + f.KeyParam
	case f.KeyParam != "":
		f.Reason = "side effects keyed by " + f.KeyParam + " (optional: a call without it is not protected)"
	default:
		f.Flagged = true
		f.Reason = flagReason(f)
	}
	return f
}

func flagReason(f Finding) string {
	var b strings.Builder
	if f.Annotated {
		b.WriteString("not read-only")
	} else {
		b.WriteString("no annotations (defaults to not read-only)")
	}
	b.WriteString(" and no idempotency key parameter: a retried call repeats its side effect")
	if f.IdempotentHint {
		b.WriteString("; idempotentHint is set, which holds only if the tool merely sets a value")
	}
	return b.String()
}

// keyParam finds an idempotency key property in a listed input schema (the
// client sees it as generic JSON) and whether it is required.
func keyParam(schema any) (name string, required bool) {
	m, ok := schema.(map[string]any)
	if !ok {
		return "", false
	}
	props, _ := m["properties"].(map[string]any)
	var names []string
	for p := range props {
		if IsKeyParam(p) {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	slices.Sort(names) // deterministic when a schema has several spellings
	req, _ := m["required"].([]any)
	for _, n := range names {
		if slices.Contains(req, any(n)) {
			return n, true
		}
	}
	return names[0], false
}

// IsKeyParam reports whether a property name spells "idempotency key":
// with '_' and '-' removed and lower-cased it is "idempotencykey".
func IsKeyParam(name string) bool {
	s := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
	return s == "idempotencykey"
}
