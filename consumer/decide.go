package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// decide maps the engine's answer to a Decision. mayRecover is false on the
// second run after a recovery, so a record is recovered at most once per
// delivery.
func (p *Processor) decide(ctx context.Context, d Decision, req idem.Request, m *Message, res idem.Result, err error, mayRecover bool) Decision {
	var (
		fe  *idem.FailureError
		me  *idem.MismatchError
		ue  *idem.UnknownOutcomeError
		ife *idem.InFlightError
		ke  *idem.KeyError
	)
	switch {
	case err == nil:
		d.Action, d.Outcome, d.Record, d.Value = ActionAck, idem.OutcomeFirst, &res.Record, res.Value
		if res.Replayed {
			d.Outcome = idem.OutcomeReplay
		}
		return d
	case errors.As(err, &fe):
		d.Outcome = idem.OutcomeFailed
		if fe.Replayed {
			d.Outcome = idem.OutcomeReplay
		}
		if res.Record.Key != "" {
			d.Record = &res.Record
		}
		return p.deadLetter(ctx, d, ReasonFailed, d.Record, err)
	case errors.As(err, &me):
		d.Outcome = idem.OutcomeMismatch
		return p.deadLetter(ctx, d, ReasonMismatch, me.Record, err)
	case errors.As(err, &ue):
		if mayRecover && p.cfg.Recover != nil && ue.Record != nil {
			return p.recoverUnknown(ctx, d, req, m, *ue.Record)
		}
		d.Outcome = idem.OutcomeUnknown
		return p.deadLetter(ctx, d, ReasonUnknown, ue.Record, err)
	case errors.As(err, &ke):
		return p.deadLetter(ctx, d, ReasonInvalidKey, nil, err)
	case errors.As(err, &ife):
		return p.retry(d, idem.OutcomeConflict, ife.RetryAfter, err)
	case errors.Is(err, idem.ErrReleased):
		return p.retry(d, idem.OutcomeReleased, 0, err)
	}
	// Store unavailable, fenced, closed, cancelled: nothing this delivery
	// can settle. The engine never re-runs a started effect, so a retry is
	// safe whatever happened.
	return p.retry(d, idem.OutcomeError, 0, err)
}

// recoverUnknown asks the RecoverFunc about an unknown record, applies its
// resolution and runs the message once more (which replays, dead-letters or,
// after a release, runs the handler once).
func (p *Processor) recoverUnknown(ctx context.Context, d Decision, req idem.Request, m *Message, rec idem.Record) Decision {
	r, decided, err := p.cfg.Recover(ctx, m, rec)
	if err != nil {
		return p.retry(d, idem.OutcomeUnknown, 0, err)
	}
	if !decided {
		d.Outcome = idem.OutcomeUnknown
		return p.deadLetter(ctx, d, ReasonUnknown, &rec, &idem.UnknownOutcomeError{Scope: d.Scope, Key: string(d.Key), Record: &rec})
	}
	if r.Actor == "" {
		r.Actor = "consumer.Recover"
	}
	if _, err := p.cfg.Engine.Resolve(ctx, d.Scope, d.Key, r); err != nil && !errors.Is(err, idem.ErrNotFound) {
		// Fenced: someone resolved or re-claimed it first; the next
		// delivery sees the new state.
		return p.retry(d, idem.OutcomeError, 0, err)
	}
	p.cfg.Logger.InfoContext(ctx, "consumer: unknown record recovered", "scope", d.Scope,
		"key_hash", keyHash(d.Scope, d.Key), "release", r.Release, "as", string(r.As))
	res, err := p.run(ctx, req, m)
	return p.decide(ctx, d, req, m, res, err, false)
}

func (p *Processor) retry(d Decision, out idem.Outcome, delay time.Duration, err error) Decision {
	if delay <= 0 {
		delay = p.cfg.RetryDelay
	}
	d.Action, d.Outcome, d.Delay, d.Err = ActionRetry, out, delay, err
	return d
}

func (p *Processor) deadLetter(ctx context.Context, d Decision, why Reason, rec *idem.Record, err error) Decision {
	d.Action, d.Reason, d.Record, d.Err = ActionDeadLetter, why, rec, err
	if d.Outcome == "" {
		d.Outcome = idem.OutcomeError
	}
	p.cfg.Logger.WarnContext(ctx, "consumer: message dead-lettered", "reason", string(why),
		"scope", d.Scope, "key_hash", keyHash(d.Scope, d.Key), "err", err)
	return d
}

// keyHash hides a key in logs while keeping it correlatable.
func keyHash(scope string, key idem.Key) string {
	s := sha256.Sum256([]byte(scope + "\x00" + string(key)))
	return hex.EncodeToString(s[:8])
}
