package idemmcp

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrNoPrincipal is returned (as a protocol error) when a keyed tool is
// called on a session without an authenticated principal and no
// Config.Scope was configured: keys are never shared between callers by
// accident.
var ErrNoPrincipal = errors.New("idemmcp: no authenticated principal to scope the idempotency key; set Config.Scope")

// ScopeFunc returns the scope of a tool call: who its key belongs to.
type ScopeFunc func(ctx context.Context, req *mcp.CallToolRequest) (string, error)

// Config configures a [Guard].
type Config struct {
	// Engine runs the calls. Required.
	Engine *idem.Engine
	// Scope returns the scope of a call. One scope never sees another's
	// records. Defaults to [PrincipalScope], which refuses calls without an
	// authenticated principal; a server with one trusted caller (a local
	// stdio server) uses [FixedScope].
	Scope ScopeFunc
	// Policy overrides the engine's defaults for keyed tools (in-flight
	// policy, lease, timeout). Defaults to the engine's configuration.
	Policy idem.Policy
	// DigestSecret keys the per-argument digests a record keeps, from
	// which a mismatch names the arguments that differ: each scope's
	// digests are keyed with a key derived from it (HMAC-SHA256, see
	// [idem.DigestKey]), so they cannot be compared across scopes, nor a
	// guessed value tested against them without the secret. It must be at
	// least [idem.MinDigestSecret] bytes; give every server that shares a
	// store the same one. In the global scope (a Scope that returns "")
	// no digests are kept and a mismatch names no arguments. Defaults to 32
	// random bytes drawn by [NewGuard]: a mismatch then names no arguments
	// for a record another process (another replica, or this one before a
	// restart) made.
	DigestSecret []byte
}

// PrincipalScope scopes keys to the session's authenticated principal: the
// user id of the bearer token verified by the SDK's auth middleware. It
// fails with [ErrNoPrincipal] when there is none.
func PrincipalScope(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return "user:" + req.Extra.TokenInfo.UserID, nil
	}
	return "", ErrNoPrincipal
}

// FixedScope puts every call in one scope. Use it only when every caller
// of the server is the same principal, such as a stdio server started by
// one user's agent host.
func FixedScope(scope string) ScopeFunc {
	return func(context.Context, *mcp.CallToolRequest) (string, error) { return scope, nil }
}
