package idemmcp

import (
	"context"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callState follows one keyed call from the middleware into the tool's
// handler.
type callState struct {
	key     idem.Key
	attempt *idem.Attempt
	// invoked is set when the tool's own handler starts: before that point
	// (schema validation, argument decoding) no effect can have happened.
	invoked atomic.Bool
	// first is the result of the run that recorded it, returned as is.
	first *mcp.CallToolResult
}

type callStateKey struct{}

func withCallState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, callStateKey{}, st)
}

func callStateFrom(ctx context.Context) *callState {
	st, _ := ctx.Value(callStateKey{}).(*callState)
	return st
}

func markInvoked(ctx context.Context) {
	if st := callStateFrom(ctx); st != nil {
		st.invoked.Store(true)
	}
}

// KeyFromContext returns the idempotency key of the keyed tool call whose
// handler is running with ctx (the runtime-supplied key when there was one).
// Forward it to a provider that accepts idempotency keys.
func KeyFromContext(ctx context.Context) (idem.Key, bool) {
	st := callStateFrom(ctx)
	if st == nil {
		return "", false
	}
	return st.key, true
}

// AttemptFromContext returns the engine's attempt for the keyed tool call
// whose handler is running with ctx, or nil.
func AttemptFromContext(ctx context.Context) *idem.Attempt {
	if st := callStateFrom(ctx); st != nil {
		return st.attempt
	}
	return nil
}
