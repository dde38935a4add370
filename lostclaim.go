package idem

import (
	"context"
	"errors"
	"time"
)

// An outcome write refused as fenced is normally the rules at work: a
// resolution, a re-drive or a re-claim of an expired record moved the
// record on and bumped its fence. A store that went back in time refuses
// it too — after a failover to a replica that never received the claim,
// the record is gone, or a retry has claimed the key afresh at a fence
// that did not grow — and then a second effect may already be running.
// lostClaim tells the two apart by reading the record, so the engine says
// what happened instead of "fenced".
//
// One legitimate path looks the same: an operator who released an
// unknown record (the row is deleted) before its late outcome arrived.
// That outcome proves the effect happened, so reporting it, and writing
// it back, is the truth the release got wrong.

// lostClaim reads the record after the outcome write for rec was refused
// (ErrFenced or ErrNotFound) and reports whether the store lost rec's
// claim, with the record it found (nil when absent). A read that fails
// says nothing: not lost.
func (e *Engine) lostClaim(ctx context.Context, rec *Record) (lost bool, found *Record) {
	cur, err := e.store.Get(ctx, rec.Scope, rec.Key)
	switch {
	case errors.Is(err, ErrNotFound):
		return true, nil
	case err != nil:
		return false, nil
	case cur.AttemptID == rec.AttemptID || cur.Fence > rec.Fence:
		return false, cur // moved on by the rules (or our own attempt)
	}
	return true, cur
}

// onRefusedOutcome handles an outcome write for rec refused with ferr
// (ErrFenced or ErrNotFound). When the store lost the claim it logs what
// happened, reports an [EventLostClaim] and, if the key is free, writes
// the known outcome (st, sealed val) back as a new record under rec's
// attempt id, so that retries replay it rather than run the effect once
// more. It returns the record written back (nil when none was) and the
// error to report: a [*LostClaimError], or ferr when the record moved on
// by the rules.
func (e *Engine) onRefusedOutcome(ctx context.Context, req *Request, rec Record, st State, val []byte, now time.Time, ferr error) (*Record, error) {
	if !errors.Is(ferr, ErrFenced) && !errors.Is(ferr, ErrNotFound) {
		return nil, ferr
	}
	lost, found := e.lostClaim(ctx, &rec)
	if !lost {
		return nil, ferr
	}
	lerr := &LostClaimError{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence, AttemptID: rec.AttemptID, Found: found}
	var frec *Record
	if found == nil {
		frec = e.writeBack(ctx, rec, st, val, now)
		lerr.WrittenBack = frec != nil
	}
	e.cfg.Logger.Error("idem: THE STORE LOST A CLAIM: the effect ran under a claim the store no longer has (a failover to a replica that never received it, or a store that forgot it); a retry may run the effect again",
		"key_hash", hashForLog(rec.Scope, rec.Key), "fence", rec.Fence, "found_fence", foundFence(found), "found_state", foundState(found),
		"outcome", string(st), "written_back", lerr.WrittenBack)
	e.cfg.Observer.Observe(ctx, Event{Kind: EventLostClaim, Delta: 1, Operation: req.Operation, Scope: rec.Scope, Key: rec.Key, Err: lerr})
	return frec, lerr
}

// writeBack records the outcome (st, sealed val) of rec's effect as a new
// record when the key is free: a claim under rec's attempt id, then the
// outcome under the claim's fence. A key someone claimed meanwhile is
// theirs: nothing is written. It returns the record written, or nil.
func (e *Engine) writeBack(ctx context.Context, rec Record, st State, val []byte, now time.Time) *Record {
	intent := rec.Intent
	if rec.opened {
		intent = rec.storedIntent
	}
	cr, err := e.store.Claim(ctx, ClaimParams{Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint,
		AttemptID: rec.AttemptID, Intent: intent, Now: now, LeaseUntil: now.Add(e.cfg.Lease)})
	if err != nil || !cr.Claimed {
		return nil
	}
	nrec := cr.Record
	nrec.opened, nrec.storedIntent = false, nil
	frec, err := e.finishAt(ctx, nrec, st, val, now)
	if err != nil {
		return nil
	}
	return frec
}

func foundFence(r *Record) int64 {
	if r == nil {
		return 0
	}
	return r.Fence
}

func foundState(r *Record) string {
	if r == nil {
		return "absent"
	}
	return string(r.State)
}
