package idemhttp

import (
	"context"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// control lets a handler tell the middleware how its attempt ended.
type control struct {
	release atomic.Bool
	unknown atomic.Bool
	attempt *idem.Attempt
}

type ctxKey struct{}

// ctlContext is context.WithValue(ctx, ctxKey{}, ctl) kept inside the call,
// so that it costs no allocation of its own.
type ctlContext struct {
	context.Context
	ctl *control
}

// Value returns the control for ctxKey and the parent's values otherwise.
func (c *ctlContext) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return c.ctl
	}
	return c.Context.Value(key)
}

func controlFrom(ctx context.Context) *control {
	c, _ := ctx.Value(ctxKey{}).(*control)
	return c
}

// ReleaseKey declares, from inside a handler protected by the middleware,
// that nothing happened (validation failed, no effect ran): the key is
// released instead of recording the response, and a retry runs again. The
// response written is still sent. It reports whether ctx belongs to a
// protected request.
func ReleaseKey(ctx context.Context) bool {
	c := controlFrom(ctx)
	if c == nil {
		return false
	}
	c.release.Store(true)
	return true
}

// MarkUnknown declares, from inside a protected handler, that the effect
// may or may not have happened (a provider call timed out): the record
// becomes unknown and retries get 409 (outcome-unknown) until it is
// resolved. MarkUnknown wins over [ReleaseKey]. It reports whether ctx
// belongs to a protected request.
func MarkUnknown(ctx context.Context) bool {
	c := controlFrom(ctx)
	if c == nil {
		return false
	}
	c.unknown.Store(true)
	return true
}

// AttemptFrom returns the attempt a protected handler runs under (scope,
// key, fence), or nil outside one.
func AttemptFrom(ctx context.Context) *idem.Attempt {
	if c := controlFrom(ctx); c != nil {
		return c.attempt
	}
	return nil
}

func (c *control) decision() (release, unknown bool) {
	return c.release.Load(), c.unknown.Load()
}
