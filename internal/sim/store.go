package sim

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// Errors the network between a process and the store makes. They are
// plain backend errors to the engine (retryable, "store unavailable").
var (
	errRefused  = errors.New("sim: connection refused (store restarting)")
	errReset    = errors.New("sim: connection reset before the call reached the store")
	errLost     = errors.New("sim: answer lost after the store applied the call")
	errRestarts = errors.New("sim: store restarted while the answer was on its way")
)

// beatMarker marks the heartbeats the simulated effect sends itself
// (Attempt.Heartbeat); a heartbeat without it came from the engine's
// background schedule, which runs on the wall clock and would make the
// history depend on timing. The lease is long enough in wall time that it
// never fires; conn counts any that does, and the run fails.
type beatMarker struct{}

// pCrashPoint is the chance that the process dies at a crash point: just
// before an outcome write leaves, or just after the store applied a claim
// or an outcome write (its answer then never arrives).
const pCrashPoint = 0.0015

// conn is one process's connection to the store: every call crosses a
// simulated network (a park each way, so other tasks run meanwhile and
// the process can die with the call in flight), may be refused while the
// store restarts, reset before it arrives, or applied with its answer
// lost. The fault decisions come from the PRNG of the intent the call is
// about. A Control breaks one guard of the store, for the control runs.
type conn struct {
	w    *world
	p    *proc
	st   idem.Store
	dead bool
}

var _ idem.Store = (*conn)(nil)

// ProcessLocal reports false whatever the store: the world's processes
// share it as they would share a store across a network, so every engine
// treats every store alike (its replay cache also takes the outcomes it
// records) and a world's history does not depend on the store under it.
func (c *conn) ProcessLocal() bool { return false }

// call runs one store operation op about (scope, key) through the
// simulated network. exec applies it to the store.
func (c *conn) call(op, scope, key string, exec func() error) error {
	w := c.w
	if c.dead {
		return idem.ErrClosed
	}
	tk := w.sched.cur
	in := w.intentOf(scope, key)
	if tk == nil || in == nil {
		// Not from a task (engine start-up) or about no intent: applied
		// directly, without faults.
		return exec()
	}
	r := in.rng
	ct := tk.data.(*taskCtx)
	// The read that follows a failed claim is the engine's clean-up of an
	// abandoned claim (abandonClaim). If it failed as well the engine
	// would go on in a background goroutine, outside the schedule, so the
	// simulation answers it: that path is covered by the engine's tests.
	bypass := op == "get" && ct.claimFailed == in.id
	ct.claimFailed = -1
	f := w.cfg.Faults
	if f && (op == "finish" || op == "release") && r.Float64() < pCrashPoint {
		w.crashHere(c.p, in, op+" sent") // after the effect, before its outcome is recorded
	}
	if !tk.park(op+" sent", w.latency(r)) {
		c.dead = true
		return idem.ErrClosed
	}
	if c.dead {
		return idem.ErrClosed
	}
	if !bypass && w.sched.Now().Before(w.storeDownUntil) {
		// The connect times out after a while.
		if !tk.park(op+" refused", time.Duration(500+r.IntN(2500))*time.Millisecond) {
			return idem.ErrClosed
		}
		c.fail(ct, op, in)
		w.faults.refused++
		return errRefused
	}
	if !bypass && f && r.Float64() < w.cfg.PReset {
		c.fail(ct, op, in)
		w.faults.reset++
		return errReset
	}
	epoch := w.storeEpoch
	err := exec()
	if f && err == nil && (op == "claim" || op == "finish") && r.Float64() < pCrashPoint {
		w.crashHere(c.p, in, op+" answered") // after the claim / after the record, its answer lost
	}
	back := w.latency(r)
	if now := w.sched.Now(); now.Before(w.storeHangUntil) {
		// The store hangs before it restarts: it applied the call, and
		// the answer waits until the restart cuts the connection.
		back += w.storeHangUntil.Sub(now)
	}
	if !tk.park(op+" answered", back) {
		c.dead = true
		return idem.ErrClosed
	}
	if !bypass && w.storeEpoch != epoch {
		c.fail(ct, op, in)
		w.faults.restartLost++
		return errRestarts
	}
	if !bypass && f && err == nil && r.Float64() < w.cfg.PLose {
		c.fail(ct, op, in)
		w.faults.lost++
		return errLost
	}
	if op == "claim" && err != nil {
		ct.claimFailed = in.id
	}
	return err
}

func (c *conn) fail(ct *taskCtx, op string, in *intent) {
	if op == "claim" {
		ct.claimFailed = in.id
	}
}

// Claim implements [idem.Store].
func (c *conn) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	var res idem.ClaimResult
	scope := p.Scope
	err := c.call("claim", p.Scope, p.Key, func() error {
		var err error
		q := p
		q.Scope = c.w.storeScope(p.Scope)
		res, err = c.st.Claim(ctx, q)
		if err != nil {
			return err
		}
		res.Record.Scope = scope
		switch c.w.cfg.Control {
		case ControlNoUniqueClaim:
			// A check-then-insert claim: a competitor that read "absent"
			// before the holder wrote inserts as well.
			if !res.Claimed && res.Record.State == idem.StateInProgress && !res.Record.LeaseExpired(p.Now) {
				rec, rerr := c.st.Resolve(ctx, idem.ResolveParams{Scope: q.Scope, Key: q.Key, From: []idem.State{idem.StateInProgress},
					To: idem.StateInProgress, AttemptID: p.AttemptID, Now: p.Now, LeaseUntil: p.LeaseUntil})
				if rerr == nil {
					res = idem.ClaimResult{Record: *rec, Claimed: true}
					res.Record.Scope = scope
				}
			}
		case ControlNoFingerprint:
			res.Record.Fingerprint = p.Fingerprint
		}
		if res.Claimed {
			if ct := c.w.curCtx(); ct != nil {
				ct.mayHold = true // from here a death of the process leaves the claim behind
			}
		}
		return nil
	})
	if err == nil && res.Claimed {
		c.w.leases[p.AttemptID] = res.Record.LeaseUntil
	}
	return res, err
}

// unfence rewrites an outcome write's fence and attempt to the record's
// current ones: the ControlNoFence store, which ignores fences.
func (c *conn) unfence(ctx context.Context, scope, key string, fence *int64, attempt *string) {
	if c.w.cfg.Control != ControlNoFence {
		return
	}
	if cur, err := c.st.Get(ctx, scope, key); err == nil {
		if cur.Fence != *fence || cur.AttemptID != *attempt {
			c.w.faults.unfenced++
		}
		*fence, *attempt = cur.Fence, cur.AttemptID
	}
}

// Finish implements [idem.Store].
func (c *conn) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	var out *idem.Record
	err := c.call("finish", p.Scope, p.Key, func() error {
		q := p
		q.Scope = c.w.storeScope(p.Scope)
		if c.w.cfg.Control != ControlNone {
			q.Claim = idem.Record{} // the hint no longer matches what the store holds
		}
		c.unfence(ctx, q.Scope, q.Key, &q.Fence, &q.AttemptID)
		var err error
		out, err = c.st.Finish(ctx, q)
		if errors.Is(err, idem.ErrFenced) && c.w.cfg.Control == ControlNoFence && q.State.Terminal() {
			// Without a fence the outcome write is an unconditional
			// update: it overwrites a decided record too.
			out, err = c.st.Resolve(ctx, idem.ResolveParams{Scope: q.Scope, Key: q.Key, From: []idem.State{idem.StateSucceeded, idem.StateFailed},
				To: q.State, AttemptID: q.AttemptID, Result: q.Result, Now: q.CompletedAt, ExpiresAt: q.ExpiresAt})
		}
		if out != nil {
			out.Scope = p.Scope
		}
		return err
	})
	return out, err
}

// Release implements [idem.Store].
func (c *conn) Release(ctx context.Context, p idem.ReleaseParams) error {
	return c.call("release", p.Scope, p.Key, func() error {
		q := p
		q.Scope = c.w.storeScope(p.Scope)
		c.unfence(ctx, q.Scope, q.Key, &q.Fence, &q.AttemptID)
		return c.st.Release(ctx, q)
	})
}

// Heartbeat implements [idem.Store].
func (c *conn) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if ctx.Value(beatMarker{}) == nil {
		c.w.backgroundBeats++
		return nil
	}
	err := c.call("heartbeat", p.Scope, p.Key, func() error {
		q := p
		q.Scope = c.w.storeScope(p.Scope)
		c.unfence(ctx, q.Scope, q.Key, &q.Fence, &q.AttemptID)
		return c.st.Heartbeat(ctx, q)
	})
	if err == nil {
		c.w.leases[p.AttemptID] = p.LeaseUntil
	}
	return err
}

// Resolve implements [idem.Store].
func (c *conn) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	var out *idem.Record
	err := c.call("resolve", p.Scope, p.Key, func() error {
		q := p
		q.Scope = c.w.storeScope(p.Scope)
		var err error
		out, err = c.st.Resolve(ctx, q)
		if out != nil {
			out.Scope = p.Scope
		}
		return err
	})
	if err == nil && p.To == idem.StateInProgress && !p.Release {
		c.w.leases[p.AttemptID] = p.LeaseUntil
	}
	return out, err
}

// SetMark implements [idem.Store].
func (c *conn) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	return c.call("set_mark", scope, key, func() error {
		return c.st.SetMark(ctx, c.w.storeScope(scope), key, fence, mark)
	})
}

// Get implements [idem.Store].
func (c *conn) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	var out *idem.Record
	err := c.call("get", scope, key, func() error {
		var err error
		out, err = c.st.Get(ctx, c.w.storeScope(scope), key)
		if out != nil {
			out.Scope = scope
		}
		return err
	})
	return out, err
}

// List implements [idem.Store]; the engine's request path never lists.
func (c *conn) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if c.dead {
		return nil, idem.ErrClosed
	}
	return c.st.List(ctx, f)
}

// Sweep implements [idem.Store]; sweeps run on the scheduler.
func (c *conn) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if c.dead {
		return 0, idem.ErrClosed
	}
	return c.st.Sweep(ctx, p)
}

// Close implements [idem.Store]: it closes this connection, not the store.
func (c *conn) Close() error { c.dead = true; return nil }
