package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// app is the server and what it owns.
type app struct {
	server  *mcp.Server
	engine  *idem.Engine
	ledger  *ledger
	backend *backend
}

func newApp(ctx context.Context, path string) (*app, error) {
	b, err := openBackend(ctx, path)
	if err != nil {
		return nil, err
	}
	l, err := newLedger(ctx, b.db())
	if err != nil {
		b.Close()
		return nil, err
	}
	// Agents retry within minutes; a day of replay covers a host restart
	// and a re-plan the next morning.
	e, err := idem.New(b.store(), idem.Config{TTL: 24 * time.Hour, Cover: map[string]time.Duration{"agent retry window": time.Hour}})
	if err != nil {
		b.Close()
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-refunds", Version: "v0.1.0"}, nil)
	g, err := idemmcp.NewGuard(s, idemmcp.Config{
		Engine: e,
		// A stdio server is started by one user's agent host: one principal.
		Scope: idemmcp.FixedScope("local"),
		// A duplicate that arrives while the first call runs waits for it
		// and gets the same refund, rather than an error.
		Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: 10 * time.Second},
	})
	if err != nil {
		b.Close()
		return nil, err
	}
	a := &app{server: s, engine: e, ledger: l, backend: b}
	idemmcp.AddTool(g, &mcp.Tool{
		Name:        "create_refund",
		Description: "Refund part or all of a card charge. Money moves: call it once per refund.",
	}, a.createRefund)
	idemmcp.AddTool(g, &mcp.Tool{
		Name:        "list_refunds",
		Description: "List the refunds issued for a charge.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, a.listRefunds)
	return a, nil
}

// Close releases the engine and the database.
func (a *app) Close() error {
	return errors.Join(a.engine.Close(), a.backend.Close())
}

type refundArgs struct {
	ChargeID    string `json:"charge_id" jsonschema:"the charge to refund, e.g. ch_123"`
	AmountCents int64  `json:"amount_cents" jsonschema:"amount to refund, in cents"`
	Currency    string `json:"currency" jsonschema:"ISO 4217 currency code, e.g. EUR"`
	Reason      string `json:"reason,omitempty" jsonschema:"why the refund is issued"`
}

func (a *app) createRefund(ctx context.Context, _ *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, refund, error) {
	if in.ChargeID == "" || in.AmountCents <= 0 || len(in.Currency) != 3 {
		// Nothing happened: release the key so the corrected call can use it.
		return nil, refund{}, idem.Release(errors.New("charge_id, a positive amount_cents and a 3-letter currency are required"))
	}
	key, _ := idemmcp.KeyFromContext(ctx)
	r, err := a.ledger.insert(ctx, refund{ChargeID: in.ChargeID, AmountCents: in.AmountCents, Currency: in.Currency, Reason: in.Reason, Key: string(key)})
	if err != nil {
		return nil, refund{}, fmt.Errorf("refund not issued: %w", err)
	}
	return nil, r, nil
}

type listArgs struct {
	ChargeID string `json:"charge_id" jsonschema:"the charge whose refunds to list"`
}

type refundList struct {
	Refunds []refund `json:"refunds"`
}

func (a *app) listRefunds(ctx context.Context, _ *mcp.CallToolRequest, in listArgs) (*mcp.CallToolResult, refundList, error) {
	rs, err := a.ledger.list(ctx, in.ChargeID)
	if err != nil {
		return nil, refundList{}, err
	}
	return nil, refundList{Refunds: rs}, nil
}
