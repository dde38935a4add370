package idem

import (
	"context"
	"fmt"
)

// Do runs fn at most once per intent and returns its typed result, encoded
// with the engine's [Codec] when recorded and decoded on replays. The
// returned [Result] says whether the outcome was replayed. Outcome mapping
// and errors are those of [Engine.DoBytes].
func Do[T any](ctx context.Context, e *Engine, req Request, fn func(ctx context.Context, a *Attempt) (T, error)) (T, Result, error) {
	var zero T
	res, err := e.DoBytes(ctx, req, func(ctx context.Context, a *Attempt) ([]byte, error) {
		v, err := fn(ctx, a)
		if err != nil {
			return nil, err
		}
		b, merr := e.cfg.Codec.Marshal(v)
		if merr != nil {
			// The effect ran but its result cannot be recorded: evidence,
			// not a failure and never a release.
			return nil, Unknown(fmt.Errorf("idem: encode result: %w", merr))
		}
		return b, nil
	})
	if err != nil || res.State != StateSucceeded {
		return zero, res, err
	}
	var v T
	if uerr := e.cfg.Codec.Unmarshal(res.Value, &v); uerr != nil {
		return zero, res, fmt.Errorf("idem: decode recorded result: %w", uerr)
	}
	return v, res, nil
}
