package reconcile

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
		return fmt.Errorf("provider entries not matched: %d local records could not be read (see errors)", ru.unreadable)
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
			return fmt.Errorf("list provider entries: %w", err)
		}
		if got.AppliedAt.Before(since) {
			continue // not what was asked for; AppliedBefore counts it
		}
		if r.seenKey(ctx, ru, got) {
			continue
		}
		if !anyApplied(got) {
			r.skipEntries(ru, got, "declined, no local record", false)
			continue
		}
		r.orphan(ctx, ru, got)
	}
	return r.olderPass(ctx, ru, since)
}

// olderPass counts the provider's entries older than the look-back that
// no local record matched: they were not compared, and may hide an
// under-count or a duplicate.
func (r *Reconciler) olderPass(ctx context.Context, ru *run, since time.Time) error {
	ol, ok := r.prov.(OlderLister)
	if !ok {
		return nil
	}
	for got, err := range ol.AppliedBefore(ctx, since) {
		if err != nil {
			return fmt.Errorf("list provider entries: %w", err)
		}
		switch {
		case r.seenKey(ctx, ru, got):
		case !anyApplied(got):
			r.skipEntries(ru, got, "declined, no local record", false)
		default:
			r.skipEntries(ru, got, "older than the look-back, no local record", true)
		}
	}
	return nil
}

// skipEntries counts every entry under got's key as skipped.
func (r *Reconciler) skipEntries(ru *run, got Applied, reason string, unchecked bool) {
	for _, e := range entries(got) {
		ru.rep.skip(reason, unchecked, e.Line)
	}
}

// seenKey reports whether got's key belongs to a local record this run
// read. A key listed more than once whose record an earlier run marked
// reconciled (so this run did not ask the provider about it) is reported
// as a duplicate here.
func (r *Reconciler) seenKey(ctx context.Context, ru *run, got Applied) bool {
	id, ok := ru.seen[got.Key]
	if !ok {
		return false
	}
	if len(got.Repeats) == 0 || ru.looked[got.Key] {
		return true
	}
	ru.looked[got.Key] = true
	scope, key, _ := strings.Cut(id, "\x00")
	rec, err := r.store.Get(ctx, scope, key)
	if err == nil {
		err = r.eng.Config().Encryption.OpenRecord(rec)
	}
	if err != nil {
		r.fail(ru, idem.Record{Scope: scope, Key: key, CreatedAt: ru.now}, got.Key, err)
		return true
	}
	in, _ := idem.DecodeIntent(rec.Intent) // it was read once this run
	f := Finding{Scope: scope, Key: key, ForwardKey: got.Key, Age: ru.now.Sub(rec.CreatedAt)}
	if in != nil {
		f.Local, f.LocalCurrency = in.Amount, in.Currency
	}
	ru.rep.Counts[ClassSkipped]-- // counted skipped (reconciled earlier) by the local pass
	r.duplicate(ctx, ru, *rec, f, got, false)
	return true
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
		r.skipEntries(ru, got, "another scope than the run's", false)
		return
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
	if len(got.Repeats) > 0 {
		first := firstApplied(got)
		f.Class, f.Detail = ClassDuplicate, "no local record; recorded from the provider; "+duplicateDetail(got)
		f.Provider, f.ProviderCurrency = appliedSum(got, first.Currency), first.Currency
		got = first
	}
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
