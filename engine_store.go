package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// retry calls op, retrying store failures (not ctx errors or contract
// answers) up to StoreRetries times. Retried writes carry the same fence and
// attempt id, so a write whose answer was lost is recognised by the store.
func (e *Engine) retry(ctx context.Context, name string, op func() error) error {
	var err error
	for i := 0; ; i++ {
		err = e.storeOp(ctx, name, op)
		if err == nil || !retryable(ctx, err) || i >= e.cfg.StoreRetries {
			break
		}
		t := time.NewTimer(time.Duration(i+1) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return wrapStore(name, ctx.Err())
		case <-t.C:
		}
	}
	return wrapStore(name, err)
}

// storeOp runs one store operation, reporting it to the observer. A
// failure while ctx has ended is reported as ctx's error: a caller that
// went away is not a store failure.
func (e *Engine) storeOp(ctx context.Context, name string, op func() error) error {
	if !e.observe {
		return op()
	}
	start := time.Now()
	err := op()
	oerr := err
	if err != nil && ctx.Err() != nil {
		oerr = ctx.Err()
	}
	e.cfg.Observer.Observe(ctx, Event{Kind: EventStore, StoreOp: name, Duration: time.Since(start), Err: oerr})
	return err
}

// Backoff bounds for outcome writes retried until FinishTimeout.
const (
	finishBackoffMin = 10 * time.Millisecond
	finishBackoffMax = time.Second
)

// retryFinishing calls op, an outcome write (finish, release), retrying
// store failures with capped exponential backoff until it succeeds, gets a
// contract answer, or ctx — the finishing context, bounded by
// FinishTimeout — ends. A store that blips after the effect ran must not
// cost the outcome: StoreRetries bounds the request path's retries, not
// these. Retried writes carry the same fence and attempt id.
func (e *Engine) retryFinishing(ctx context.Context, name string, op func() error) error {
	var err error
	delay := finishBackoffMin
	for {
		err = e.storeOp(ctx, name, op)
		if err == nil || !retryable(ctx, err) {
			break
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			delay = max(time.Until(dl), 0)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return wrapStore(name, err)
		case <-t.C:
		}
		delay = min(2*delay, finishBackoffMax)
	}
	return wrapStore(name, err)
}

func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrNotDurable): // the store waited its own bound already
		return false
	}
	return true
}

// wrapStore marks backend failures as ErrStoreUnavailable while letting the
// contract's own answers through unchanged.
func wrapStore(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrStoreUnavailable):
		return err
	}
	return &StoreError{Op: op, Err: err}
}

func (e *Engine) claim(ctx context.Context, p ClaimParams) (ClaimResult, error) {
	var cr ClaimResult
	err := e.retry(ctx, "claim", func() (err error) {
		cr, err = e.store.Claim(ctx, p)
		return err
	})
	if err != nil && ctx.Err() != nil {
		// The caller went away while the claim ran: that, not the store,
		// is why it failed, whatever error the driver made of it.
		return cr, ctx.Err()
	}
	if err == nil {
		err = e.openRecord(&cr.Record)
	}
	return cr, err
}

func (e *Engine) finish(ctx context.Context, rec Record, st State, val []byte) (*Record, error) {
	return e.finishAt(ctx, rec, st, val, e.now())
}

// finishAt is finish with the engine clock already read.
func (e *Engine) finishAt(ctx context.Context, rec Record, st State, val []byte, now time.Time) (*Record, error) {
	p := FinishParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence, AttemptID: rec.AttemptID,
		State: st, Result: val, CompletedAt: now, Claim: rec}
	if st.Terminal() {
		// Retention counts from the moment the outcome is recorded.
		p.ExpiresAt = now.Add(e.cfg.TTL)
	}
	if e.cfg.Encryption != nil {
		// val is sealed already (see run). The claim as held here has its
		// intent opened: the hint carries the intent as the store holds it,
		// kept when the claim was opened, or there is no hint.
		if rec.opened {
			p.Claim.Intent, p.Claim.storedIntent, p.Claim.opened = rec.storedIntent, nil, false
		} else {
			p.Claim = Record{}
		}
	}
	var out *Record
	err := e.retryFinishing(ctx, "finish", func() (err error) {
		out, err = e.store.Finish(ctx, p)
		return err
	})
	return out, err
}

func (e *Engine) markUnknown(ctx context.Context, rec Record, now time.Time) (*Record, error) {
	var out *Record
	err := e.retry(ctx, "mark_unknown", func() (err error) {
		out, err = e.store.Finish(ctx, FinishParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence,
			AttemptID: rec.AttemptID, State: StateUnknown, CompletedAt: now})
		return err
	})
	if err == nil {
		err = e.openRecord(out)
	}
	if err == nil {
		e.cfg.Logger.Warn("idem: lease expired; record marked unknown", "key_hash", hashForLog(rec.Scope, rec.Key), "fence", rec.Fence)
		e.flights.poke(rec.Scope, rec.Key)
	}
	return out, err
}

func (e *Engine) release(ctx context.Context, rec Record) error {
	return e.retryFinishing(ctx, "release", func() error {
		return e.store.Release(ctx, ReleaseParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence, AttemptID: rec.AttemptID})
	})
}

func (e *Engine) resolve(ctx context.Context, p ResolveParams) (*Record, error) {
	if e.cfg.Encryption != nil && len(p.Result) > 0 {
		// Sealed once, so that every retry writes the same bytes.
		var err error
		if p.Result, err = e.cfg.Encryption.SealResult(p.Scope, p.Key, p.Result); err != nil {
			return nil, err
		}
	}
	var out *Record
	err := e.retry(ctx, "resolve", func() (err error) {
		out, err = e.store.Resolve(ctx, p)
		return err
	})
	if err == nil {
		err = e.openRecord(out)
	}
	return out, err
}

func (e *Engine) get(ctx context.Context, scope, key string) (*Record, error) {
	var out *Record
	err := e.retry(ctx, "get", func() (err error) {
		out, err = e.store.Get(ctx, scope, key)
		return err
	})
	if err == nil {
		err = e.openRecord(out)
	}
	return out, err
}

// openRecord opens r's sealed values in place. r is the caller's (the
// store returned it); its byte slices are replaced, not written to.
// Without encryption a sealed value (a store shared with engines that
// encrypt) is an ErrUnknownKey, never served as it is.
func (e *Engine) openRecord(r *Record) error {
	if r == nil || e.cfg.Encryption == nil && !Sealed(r.Result) && !Sealed(r.Intent) {
		return nil
	}
	stored := r.Intent
	if err := e.cfg.Encryption.OpenRecord(r); err != nil {
		return err
	}
	r.storedIntent, r.opened = stored, true
	return nil
}

// sealResult seals an outcome's value for rec's record when encryption is
// on, once, before the write is tried and retried or spooled.
func (e *Engine) sealResult(rec *Record, val []byte) ([]byte, error) {
	if e.cfg.Encryption == nil {
		return val, nil
	}
	return e.cfg.Encryption.SealResult(rec.Scope, rec.Key, val)
}

// plainFinished puts the plaintext back into the record a sealed outcome
// write returned: val is the outcome's value, claim the opened claim.
func (e *Engine) plainFinished(frec *Record, claim *Record, val []byte) {
	if e.cfg.Encryption == nil || frec == nil {
		return
	}
	frec.Result, frec.Intent = val, claim.Intent
}

// LogHash is how idem names a (scope, key) in its logs: the first 8 bytes
// of SHA-256(scope NUL key), in hex. It hides both while keeping log lines
// about one record — the engine's, the proxy's, an application's —
// correlatable. LogHash(scope, "") names a scope.
func LogHash(scope, key string) string { return hashForLog(scope, key) }

// hashForLog hides a key and scope in logs while keeping them correlatable.
func hashForLog(scope, key string) string {
	s := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(s[:8])
}
