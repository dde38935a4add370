package idemmcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/memstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture is a guarded server with a keyed typed tool (create_refund), a
// keyed raw tool (send_email), a read-only tool (get_balance), and a
// blocking keyed tool (hold) for in-flight tests.
type fixture struct {
	store   *memstore.Store
	engine  *idem.Engine
	server  *mcp.Server
	refunds atomic.Int64 // create_refund effects
	emails  atomic.Int64 // send_email effects
	reads   atomic.Int64 // get_balance calls
	holds   atomic.Int64 // hold effects

	mu       sync.Mutex
	seenKeys []string      // keys seen by create_refund handlers, via the context
	holding  chan struct{} // closed to let hold calls finish
	entered  chan struct{} // receives when a hold handler starts
}

type refundIn struct {
	ChargeID string `json:"charge_id" jsonschema:"the charge to refund"`
	Amount   int64  `json:"amount" jsonschema:"amount in cents"`
	Fail     bool   `json:"fail,omitempty" jsonschema:"fail after the effect (tests)"`
	Release  bool   `json:"release,omitempty" jsonschema:"fail before any effect (tests)"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

// refundTool is the tool definition tests check for non-mutation.
var refundTool = mcp.Tool{Name: "create_refund", Description: "refund a charge",
	Annotations: &mcp.ToolAnnotations{Title: "Refund", DestructiveHint: new(false)}}

func newFixture(scope idemmcp.ScopeFunc, pol idem.Policy) (*fixture, error) {
	return newFixtureOn(memstore.New(), idemmcp.Config{Scope: scope, Policy: pol})
}

// newFixtureOn is a fixture over st whose guard has cfg (its engine
// added).
func newFixtureOn(st *memstore.Store, cfg idemmcp.Config) (*fixture, error) {
	f := &fixture{store: st, holding: make(chan struct{}), entered: make(chan struct{}, 16)}
	e, err := idem.New(f.store, idem.Config{})
	if err != nil {
		return nil, err
	}
	f.engine = e
	f.server = mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "v1"}, nil)
	cfg.Engine = e
	g, err := idemmcp.NewGuard(f.server, cfg)
	if err != nil {
		return nil, err
	}
	idemmcp.AddTool(g, &refundTool, f.createRefund)
	g.AddTool(&mcp.Tool{Name: "send_email", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}},
	}}, f.sendEmail)
	idemmcp.AddTool(g, &mcp.Tool{Name: "get_balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, f.getBalance)
	idemmcp.AddTool(g, &mcp.Tool{Name: "hold"}, f.hold)
	return f, nil
}

func (f *fixture) createRefund(ctx context.Context, _ *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, refundOut, error) {
	if in.Release {
		return nil, refundOut{}, idem.Release(errors.New("card network refused before refunding"))
	}
	k, _ := idemmcp.KeyFromContext(ctx)
	f.mu.Lock()
	f.seenKeys = append(f.seenKeys, string(k))
	f.mu.Unlock()
	n := f.refunds.Add(1)
	if in.Fail {
		return nil, refundOut{}, fmt.Errorf("refund rf_%d bounced", n)
	}
	return nil, refundOut{RefundID: fmt.Sprintf("rf_%d", n)}, nil
}

func (f *fixture) sendEmail(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := f.emails.Add(1)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("email %d sent", n)}}}, nil
}

func (f *fixture) getBalance(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	n := f.reads.Add(1)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("read %d", n)}}}, nil, nil
}

func (f *fixture) hold(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	f.entered <- struct{}{}
	select {
	case <-f.holding:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	n := f.holds.Add(1)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("held %d", n)}}}, nil, nil
}

func (f *fixture) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seenKeys...)
}
