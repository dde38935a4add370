package idemmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyDescription tells the model how to use the key. It is the one place
// where the contract reaches the model, so it says what to do on a retry.
const keyDescription = "Idempotency key for this action. Use a new unique value " +
	"(for example a UUID) for each new action. When you retry the same action " +
	"(after a timeout, an error or a restart), send the same key with the same " +
	"arguments: the action then happens only once and the retry returns the " +
	"first result. Never reuse a key for a different action."

// Guard adds keyed tools to an mcp.Server and runs their calls through an
// idem engine. Create it with [NewGuard]; it is safe for concurrent use.
type Guard struct {
	server *mcp.Server
	cfg    Config

	mu    sync.RWMutex
	keyed map[string]bool // tool names whose calls go through the engine
	// digests keys the per-argument digests (Config.DigestSecret, or a
	// random one).
	digests *idem.DigestKey
}

// NewGuard returns a Guard over server and installs its receiving
// middleware, which intercepts tools/call for keyed tools.
func NewGuard(server *mcp.Server, cfg Config) (*Guard, error) {
	if server == nil {
		return nil, errors.New("idemmcp: NewGuard: server is nil")
	}
	if cfg.Engine == nil {
		return nil, errors.New("idemmcp: NewGuard: Config.Engine is required")
	}
	if cfg.Scope == nil {
		cfg.Scope = PrincipalScope
	}
	digests, err := idem.NewDigestKey(cfg.DigestSecret)
	if err != nil {
		return nil, fmt.Errorf("idemmcp: NewGuard: Config.DigestSecret: %w", err)
	}
	g := &Guard{server: server, cfg: cfg, keyed: make(map[string]bool), digests: digests}
	server.AddReceivingMiddleware(g.middleware)
	return g, nil
}

// Server returns the guarded server.
func (g *Guard) Server() *mcp.Server { return g.server }

// AddTool adds a tool with a typed handler, as mcp.AddTool does. A tool
// whose annotations say readOnlyHint is added unchanged. Any other tool is
// keyed: its input schema (inferred from In when t.InputSchema is nil) gets
// the required string property [KeyParam], its annotations say
// idempotentHint: true, and its calls run through the engine. In may
// declare an idempotency_key string field to receive the key; otherwise use
// [KeyFromContext].
//
// Like mcp.AddTool it panics on a programming error: a schema that cannot be
// inferred, or an existing idempotency_key property that is not a string.
func AddTool[In, Out any](g *Guard, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if isReadOnly(t) {
		g.setKeyed(t.Name, false)
		mcp.AddTool(g.server, t, h)
		return
	}
	schema, err := typedSchema[In](t.InputSchema)
	if err == nil {
		err = addKeyParam(schema)
	}
	if err != nil {
		panic(fmt.Sprintf("idemmcp: AddTool %q: %v", t.Name, err))
	}
	tt := keyedTool(t, schema)
	g.setKeyed(t.Name, true)
	mcp.AddTool(g.server, tt, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		markInvoked(ctx)
		return h(ctx, req, in)
	})
}

// AddTool adds a tool with a raw handler, as mcp.Server.AddTool does (the
// handler decodes and validates its own arguments). Read-only tools are
// added unchanged; any other tool is keyed as with [AddTool]. t.InputSchema
// must be a JSON Schema object. It panics on a programming error, like the
// SDK.
func (g *Guard) AddTool(t *mcp.Tool, h mcp.ToolHandler) {
	if isReadOnly(t) {
		g.setKeyed(t.Name, false)
		g.server.AddTool(t, h)
		return
	}
	var schema *jsonschema.Schema
	err := errors.New("missing input schema")
	if t.InputSchema != nil {
		if schema, err = copySchema(t.InputSchema); err == nil {
			err = addKeyParam(schema)
		}
	}
	if err != nil {
		panic(fmt.Sprintf("idemmcp: AddTool %q: %v", t.Name, err))
	}
	g.setKeyed(t.Name, true)
	g.server.AddTool(keyedTool(t, schema), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		markInvoked(ctx)
		return h(ctx, req)
	})
}

// RemoveTools removes tools from the server and forgets that they were
// keyed.
func (g *Guard) RemoveTools(names ...string) {
	for _, n := range names {
		g.setKeyed(n, false)
	}
	g.server.RemoveTools(names...)
}

func (g *Guard) setKeyed(name string, keyed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if keyed {
		g.keyed[name] = true
	} else {
		delete(g.keyed, name)
	}
}

func (g *Guard) isKeyed(name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.keyed[name]
}

func (g *Guard) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		creq, ok := req.(*mcp.CallToolRequest)
		if !ok || creq.Params == nil || !g.isKeyed(creq.Params.Name) {
			return next(ctx, method, req)
		}
		return g.call(ctx, next, method, creq)
	}
}

func isReadOnly(t *mcp.Tool) bool { return t.Annotations != nil && t.Annotations.ReadOnlyHint }

// keyedTool returns a copy of t with the keyed schema and honest
// annotations: not read-only, idempotent once keyed.
func keyedTool(t *mcp.Tool, schema *jsonschema.Schema) *mcp.Tool {
	tt := *t
	tt.InputSchema = schema
	var a mcp.ToolAnnotations
	if t.Annotations != nil {
		a = *t.Annotations
	}
	a.ReadOnlyHint, a.IdempotentHint = false, true
	tt.Annotations = &a
	return &tt
}

// typedSchema returns a private copy of the given schema, or the schema
// inferred from In the way the SDK infers it.
func typedSchema[In any](given any) (*jsonschema.Schema, error) {
	if given != nil {
		return copySchema(given)
	}
	rt := reflect.TypeFor[In]()
	if rt == reflect.TypeFor[any]() {
		return &jsonschema.Schema{Type: "object"}, nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return jsonschema.ForType(rt, &jsonschema.ForOptions{})
}

// copySchema copies a schema given as any JSON-marshalable value, so that
// adding the key never changes the caller's schema.
func copySchema(v any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return &s, nil
}

// addKeyParam adds the required key property to an object schema. An
// existing property of that name is kept if it is a string.
func addKeyParam(s *jsonschema.Schema) error {
	if s.Type != "object" {
		return fmt.Errorf(`input schema must have type "object", got %q`, s.Type)
	}
	if p, ok := s.Properties[KeyParam]; ok {
		if p == nil || p.Type != "string" {
			return fmt.Errorf("input schema property %q must be a string", KeyParam)
		}
		if p.Description == "" {
			p.Description = keyDescription
		}
	} else {
		if s.Properties == nil {
			s.Properties = make(map[string]*jsonschema.Schema)
		}
		one, most := 1, 255
		s.Properties[KeyParam] = &jsonschema.Schema{Type: "string", Description: keyDescription, MinLength: &one, MaxLength: &most}
		if s.PropertyOrder != nil {
			s.PropertyOrder = append(s.PropertyOrder, KeyParam)
		}
	}
	for _, r := range s.Required {
		if r == KeyParam {
			return nil
		}
	}
	s.Required = append(s.Required, KeyParam)
	return nil
}
