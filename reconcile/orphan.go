package reconcile

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// providerPass looks for keys the provider applied that have no local
// record (released, lost, or never claimed) and records them.
func (r *Reconciler) providerPass(ctx context.Context, ru *run) error {
	if ru.unreadable > 0 {
		// An unreadable record may be the one a provider entry belongs
		// to: recording that entry as an orphan would be a second record
		// of one effect.
		return fmt.Errorf("reconcile: provider entries not matched: %d local records could not be read (see errors)", ru.unreadable)
	}
	ru.rep.ProviderListed = true
	since := ru.now.Add(-r.cfg.Lookback)
	ru.rep.ProviderSince = since
	for got, err := range r.prov.AppliedSince(ctx, since) {
		if errors.Is(err, ErrListUnsupported) {
			ru.rep.ProviderListed, ru.rep.ProviderSince = false, time.Time{}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reconcile: list provider entries: %w", err)
		}
		if got.Status != StatusApplied || got.AppliedAt.Before(since) {
			continue
		}
		if _, ok := ru.seen[got.Key]; ok {
			continue
		}
		r.orphan(ctx, ru, got)
	}
	return nil
}

// orphan records a provider entry that has no local record as succeeded,
// marked reconciled, so the key can never run its effect again.
func (r *Reconciler) orphan(ctx context.Context, ru *run, got Applied) {
	scope := got.Scope
	if scope == "" {
		scope = r.cfg.OrphanScope
	}
	ref := idem.Record{Scope: scope, Key: got.Key, CreatedAt: ru.now}
	if err := idem.ValidateKey(got.Key); err != nil {
		r.fail(ru, ref, got.Key, fmt.Errorf("provider key cannot be recorded: %w", err))
		return
	}
	if scope != r.cfg.Scope && r.cfg.Scope != "" {
		return // another scope's business
	}
	rec, err := r.store.Get(ctx, scope, got.Key)
	if err == nil {
		if oerr := r.eng.Config().Encryption.OpenRecord(rec); oerr != nil {
			r.fail(ru, *rec, got.Key, oerr)
			return
		}
	}
	switch {
	case err == nil:
		if in, _ := idem.DecodeIntent(rec.Intent); forwardKey(*rec, in) != got.Key {
			r.fail(ru, *rec, got.Key, errors.New("provider key names a local record that forwards another key"))
		}
		// Otherwise it was claimed after this run started: the next run sees it.
		return
	case !errors.Is(err, idem.ErrNotFound):
		r.fail(ru, ref, got.Key, err)
		return
	}
	f := Finding{Class: ClassUnderCounted, Scope: scope, Key: got.Key, ForwardKey: got.Key,
		Provider: got.Amount, ProviderCurrency: got.Currency, Detail: "no local record; recorded from the provider"}
	nrec, err := r.record(ctx, scope, got, ru.now)
	if err != nil {
		r.fail(ru, ref, got.Key, err)
		return
	}
	if nrec == nil {
		return // someone claimed it first; the next run compares it
	}
	r.mark(ctx, ru, *nrec, f)
}

// record claims (scope, got.Key) and records the provider's result. It
// returns nil when the key was claimed by someone else first.
func (r *Reconciler) record(ctx context.Context, scope string, got Applied, now time.Time) (*idem.Record, error) {
	val, err := r.cfg.Result(got)
	if err != nil {
		return nil, err
	}
	intent, err := json.Marshal(idem.Intent{Amount: got.Amount, Currency: got.Currency, ForwardKey: got.Key,
		Fields: map[string]string{"recorded_by": "reconcile"}})
	if err != nil {
		return nil, err
	}
	keys := r.eng.Config().Encryption
	if intent, err = keys.SealIntent(scope, got.Key, intent); err != nil {
		return nil, err
	}
	sval, err := keys.SealResult(scope, got.Key, val)
	if err != nil {
		return nil, err
	}
	attempt := "reconcile-" + randomID()
	cr, err := r.store.Claim(ctx, idem.ClaimParams{Scope: scope, Key: got.Key, AttemptID: attempt,
		Intent: intent, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || !cr.Claimed {
		return nil, err
	}
	return r.store.Finish(ctx, idem.FinishParams{Scope: scope, Key: got.Key, Fence: cr.Record.Fence,
		AttemptID: attempt, State: idem.StateSucceeded, Result: sval, CompletedAt: now,
		ExpiresAt: now.Add(r.eng.Config().TTL)})
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keyHash hides a key and scope in logs while keeping them correlatable.
func keyHash(scope, key string) string {
	s := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(s[:8])
}
