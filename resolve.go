package idem

import (
	"context"
	"errors"
	"fmt"
)

// Resolution says how an operator, a recovery hook or reconciliation
// decided an unknown record.
type Resolution struct {
	// As is StateSucceeded or StateFailed; ignored when Release is set.
	As State
	// Release deletes the record: no effect happened, the key is free.
	Release bool
	// Result is the recorded value (succeeded) or failure message (failed).
	Result []byte
	// Force allows changing a record that is not unknown (an operator
	// correcting a recorded outcome). Without it only unknown records move.
	Force bool
	// Actor and Reason are logged with the resolution: who decided and why.
	Actor, Reason string
	// IfFence, when not zero, is the fence of the record as the decider
	// saw it: the resolution is applied only if the record still has that
	// fence, in the same atomic write, and otherwise refused with
	// ErrFenced. Two deciders racing on one record (an operator and the
	// reconciler, two reconcilers) then cannot both win: every resolution
	// bumps the fence, so the second one's precondition fails. Defaults to
	// 0: no precondition beyond the state.
	IfFence int64
}

// Resolve decides a record: by default only an unknown one (ErrFenced for
// any other state unless r.Force). It bumps the fence, so a late write from
// the original attempt is refused afterwards. The decision is logged with
// r.Actor and r.Reason. It returns the new record, or nil when released.
func (e *Engine) Resolve(ctx context.Context, scope string, key Key, r Resolution) (*Record, error) {
	if err := ValidateKey(string(key)); err != nil {
		return nil, err
	}
	if err := ValidateScope(scope); err != nil {
		return nil, err
	}
	if !r.Release && !r.As.Terminal() {
		return nil, fmt.Errorf("idem: Resolve: As must be succeeded or failed (or set Release), got %q", r.As)
	}
	from := []State{StateUnknown}
	if r.Force {
		from = []State{StateUnknown, StateInProgress, StateSucceeded, StateFailed}
	}
	now := e.now()
	if r.IfFence < 0 {
		return nil, fmt.Errorf("idem: Resolve: IfFence must not be negative, got %d", r.IfFence)
	}
	p := ResolveParams{Scope: scope, Key: string(key), Fence: r.IfFence, From: from, To: r.As, Release: r.Release,
		AttemptID: "resolve-" + newAttemptID(), Result: r.Result, Now: now}
	if r.As.Terminal() {
		p.ExpiresAt = now.Add(e.cfg.TTL)
	}
	e.cache.invalidate(scope, string(key))
	rec, err := e.resolve(ctx, p)
	e.cache.invalidate(scope, string(key)) // and again, in case a replay refilled it meanwhile
	if errors.Is(err, ErrFenced) && !r.Release {
		// A retried write whose first try committed finds its own attempt
		// id on the record: that is this resolution, not another one.
		if cur, gerr := e.get(ctx, scope, string(key)); gerr == nil && cur.AttemptID == p.AttemptID {
			rec, err = cur, nil
		}
	}
	if err != nil {
		if errors.Is(err, ErrFenced) && r.IfFence != 0 {
			return nil, fmt.Errorf("%w: the record changed since fence %d was read (another decision or attempt came first)", err, r.IfFence)
		}
		if errors.Is(err, ErrFenced) && !r.Force {
			return nil, fmt.Errorf("%w: record is not unknown; use Force to change a decided record", err)
		}
		return nil, err
	}
	to := string(r.As)
	if r.Release {
		to = "released"
	}
	e.cfg.Logger.Info("idem: record resolved", "key_hash", hashForLog(scope, string(key)), "as", to,
		"force", r.Force, "actor", r.Actor, "reason", r.Reason)
	e.flights.poke(scope, string(key))
	if r.Release {
		return nil, nil // as documented, whatever the store returned
	}
	return rec, nil
}
