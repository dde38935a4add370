package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// policy is what deciding an unknown record needs to know.
type policy struct {
	window     time.Duration
	notApplied Action
	result     func(Applied) ([]byte, error)
	actor      string
}

// decision is how an unknown record was decided.
type decision struct {
	class  Class        // ClassUnderCounted, ClassNotApplied or ClassPending
	rec    *idem.Record // the record after resolution; nil when released or pending
	detail string
}

// asUnknown turns an in_progress record whose lease has passed into an
// unknown one, as every engine reader does, so that it can be resolved. A
// live in_progress record is returned with ok false.
func asUnknown(ctx context.Context, st idem.Store, keys *idem.Keyring, rec idem.Record, now time.Time) (idem.Record, bool, error) {
	if rec.State != idem.StateInProgress {
		return rec, rec.State == idem.StateUnknown, nil
	}
	if !rec.LeaseExpired(now) {
		return rec, false, nil
	}
	out, err := st.Finish(ctx, idem.FinishParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence,
		AttemptID: rec.AttemptID, State: idem.StateUnknown, CompletedAt: now})
	if err != nil {
		return rec, false, err
	}
	if err := keys.OpenRecord(out); err != nil {
		return rec, false, err
	}
	return *out, true, nil
}

// lastTouched is the latest moment the effect of rec may have started or
// finished, from which the settlement window counts: the claim, a
// re-drive (which sets a new lease), the outcome's completion. An
// in_progress or unknown record's attempt could start the effect only
// while it held its lease: a record turned unknown after its lease ran
// out (by the reconciler, or by any reader, long after the crash) counts
// from the lease's end, not from when the crash was noticed.
func lastTouched(rec idem.Record) time.Time {
	end := rec.CompletedAt
	if (rec.State == idem.StateUnknown || rec.State == idem.StateInProgress) && !rec.LeaseUntil.IsZero() &&
		(end.IsZero() || rec.LeaseUntil.Before(end)) {
		end = rec.LeaseUntil
	}
	if end.After(rec.CreatedAt) {
		return end
	}
	return rec.CreatedAt
}

// decideUnknown resolves an unknown record from the provider's answer:
// applied → succeeded with the provider's result; declined → failed; none
// past the window → per pol.notApplied; otherwise it stays unknown.
func decideUnknown(ctx context.Context, eng *idem.Engine, rec idem.Record, got Applied, lookupErr error, pol policy, now time.Time) (decision, error) {
	switch {
	case lookupErr == nil && got.Status == StatusApplied:
		val, err := appliedValue(rec, got, pol.result)
		if err != nil {
			return decision{class: ClassPending}, err
		}
		return resolve(ctx, eng, rec, ClassUnderCounted, idem.Resolution{As: idem.StateSucceeded, Result: val,
			Actor: pol.actor, Reason: "provider applied forwarded key"})
	case lookupErr == nil:
		val, err := failureValue(rec, "provider declined the request")
		if err != nil {
			return decision{class: ClassPending}, err
		}
		return resolve(ctx, eng, rec, ClassNotApplied, idem.Resolution{As: idem.StateFailed,
			Result: val, Actor: pol.actor, Reason: "provider declined forwarded key"})
	case !errors.Is(lookupErr, ErrNotApplied):
		return decision{class: ClassPending, detail: "provider cannot tell"}, lookupErr
	case now.Sub(lastTouched(rec)) < pol.window:
		return decision{class: ClassPending, detail: "inside settlement window"}, nil
	}
	switch pol.notApplied {
	case ActionRelease:
		return resolve(ctx, eng, rec, ClassNotApplied, idem.Resolution{Release: true,
			Actor: pol.actor, Reason: "provider never applied forwarded key; settlement window passed"})
	case ActionFail:
		val, err := failureValue(rec, "provider never applied the request")
		if err != nil {
			return decision{class: ClassPending}, err
		}
		return resolve(ctx, eng, rec, ClassNotApplied, idem.Resolution{As: idem.StateFailed,
			Result: val, Actor: pol.actor,
			Reason: "provider never applied forwarded key; settlement window passed"})
	}
	return decision{class: ClassPending, detail: "not applied; left for an operator"}, nil
}

// resolve applies r through the engine, which logs it and bumps the fence.
// A record that moved on meanwhile (re-driven, resolved by someone else) is
// pending: the next run looks at it again.
func resolve(ctx context.Context, eng *idem.Engine, rec idem.Record, class Class, r idem.Resolution) (decision, error) {
	r.IfFence = rec.Fence // decided on what this record said; not on what another decider made of it
	out, err := eng.Resolve(ctx, rec.Scope, idem.Key(rec.Key), r)
	if errors.Is(err, idem.ErrFenced) || errors.Is(err, idem.ErrNotFound) {
		return decision{class: ClassPending, detail: "record moved on"}, nil
	}
	if err != nil {
		return decision{class: ClassPending}, err
	}
	if r.Release {
		// Engine.Resolve documents nil for a release, but some stores hand
		// back the deleted row; there is no record left to mark either way.
		out = nil
	}
	return decision{class: class, rec: out, detail: r.Reason}, nil
}
