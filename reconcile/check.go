package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
)

// forwardKey is the key the provider knows for rec.
func forwardKey(rec idem.Record, in *idem.Intent) string {
	if in != nil && in.ForwardKey != "" {
		return in.ForwardKey
	}
	return rec.Key
}

// check classifies one local record and writes what it concluded.
func (r *Reconciler) check(ctx context.Context, ru *run, rec idem.Record) {
	if err := r.eng.Config().Encryption.OpenRecord(&rec); err != nil {
		ru.unreadable++
		r.fail(ru, rec, "", err) // a record it cannot read stays as it is
		return
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil {
		ru.unreadable++
		r.fail(ru, rec, "", fmt.Errorf("intent unreadable: %w", err))
		return
	}
	if in == nil || !r.cfg.Match(in) {
		ru.rep.add(Finding{Class: ClassSkipped, Scope: rec.Scope, Key: rec.Key})
		return
	}
	fk := forwardKey(rec, in)
	id := rec.Scope + "\x00" + rec.Key
	if other, dup := ru.seen[fk]; dup && other != id {
		r.fail(ru, rec, fk, errors.New("forward key shared with another local record; forward keys must be unique across scopes"))
		return
	}
	ru.seen[fk] = id
	if rec.Mark == idem.MarkReconciled {
		ru.rep.add(Finding{Class: ClassSkipped, Scope: rec.Scope, Key: rec.Key, ForwardKey: fk})
		return
	}
	f := Finding{Scope: rec.Scope, Key: rec.Key, ForwardKey: fk, Age: ru.now.Sub(rec.CreatedAt),
		Local: in.Amount, LocalCurrency: in.Currency}
	rec, undecided, err := asUnknown(ctx, r.store, r.eng.Config().Encryption, rec, ru.now)
	switch {
	case err != nil && errors.Is(err, idem.ErrFenced):
		f.Class, f.Detail = ClassPending, "record moved on"
		ru.rep.add(f)
		return
	case err != nil:
		r.fail(ru, rec, fk, err)
		return
	case rec.State == idem.StateInProgress:
		f.Class, f.Detail = ClassPending, "in progress"
		ru.rep.add(f)
		return
	}
	got, lerr := r.prov.Lookup(ctx, fk)
	ru.looked[fk] = true
	if lerr == nil && len(got.Repeats) > 0 {
		r.duplicate(ctx, ru, rec, f, got, undecided)
		return
	}
	if undecided {
		r.unknown(ctx, ru, rec, in, f, got, lerr)
		return
	}
	r.decided(ctx, ru, rec, in, f, got, lerr)
}

// unknown decides an unknown record and, when it was recorded from the
// provider's answer, marks it reconciled or drift.
func (r *Reconciler) unknown(ctx context.Context, ru *run, rec idem.Record, in *idem.Intent, f Finding, got Applied, lerr error) {
	d, err := decideUnknown(ctx, r.eng, rec, got, lerr, r.policy(), ru.now)
	f.Class, f.Detail = d.class, d.detail
	if err != nil {
		r.failWith(ru, rec, f, err)
		return
	}
	if d.rec == nil {
		ru.rep.add(f)
		return
	}
	if d.class == ClassUnderCounted {
		f.Local, f.Provider, f.ProviderCurrency = got.Amount, got.Amount, got.Currency
		if !agree(in, got) {
			f.Local = in.Amount
			f.Class, f.Detail = ClassDrift, "recorded from the provider; amount or currency differs from the intent"
		}
	}
	r.mark(ctx, ru, *d.rec, f)
}

// decided compares a succeeded or failed record with the provider's view.
func (r *Reconciler) decided(ctx context.Context, ru *run, rec idem.Record, in *idem.Intent, f Finding, got Applied, lerr error) {
	if lerr != nil && !errors.Is(lerr, ErrNotApplied) {
		r.cannotTell(ru, rec, in, f, lerr)
		return
	}
	succeeded := rec.State == idem.StateSucceeded
	if !succeeded {
		f.Local = 0 // a failed record counted nothing
	}
	applied := lerr == nil && got.Status == StatusApplied
	if applied {
		f.Provider, f.ProviderCurrency = got.Amount, got.Currency
	}
	settled := ru.now.Sub(lastTouched(rec)) >= r.cfg.SettlementWindow
	switch {
	case applied && succeeded && agree(in, got):
		f.Class = ClassReconciled
	case applied && succeeded:
		f.Class, f.Detail = ClassDrift, "amount or currency differs"
	case applied:
		f.Class, f.Detail = ClassDrift, "recorded failed locally, applied by the provider"
	case lerr == nil && succeeded:
		f.Class, f.Detail = ClassOverCounted, "provider declined it"
	case !settled:
		f.Class, f.Detail = ClassPending, "inside settlement window"
	case succeeded:
		f.Class, f.Detail = ClassOverCounted, "provider has no record of it"
	default:
		f.Class = ClassReconciled // failed here, nothing there
	}
	if f.Class == ClassPending {
		ru.rep.add(f)
		return
	}
	r.mark(ctx, ru, rec, f)
}

// agree reports whether the provider's amount and currency match the
// intent's. An intent without a currency carries no amount to compare.
func agree(in *idem.Intent, got Applied) bool {
	if in.Currency == "" {
		return true
	}
	return in.Amount == got.Amount && in.Currency == got.Currency
}

var classMark = map[Class]idem.Mark{
	ClassReconciled:   idem.MarkReconciled,
	ClassUnderCounted: idem.MarkReconciled,
	ClassNotApplied:   idem.MarkReconciled,
	ClassOverCounted:  idem.MarkOverCounted,
	ClassDrift:        idem.MarkDrift,
	ClassDuplicate:    idem.MarkDrift,
}

// mark stores the finding's mark on rec unless it is already there (so a
// second run writes nothing) and adds the finding to the report.
func (r *Reconciler) mark(ctx context.Context, ru *run, rec idem.Record, f Finding) {
	m := classMark[f.Class]
	if rec.Mark != m {
		if err := r.store.SetMark(ctx, rec.Scope, rec.Key, rec.Fence, m); err != nil {
			if !errors.Is(err, idem.ErrFenced) && !errors.Is(err, idem.ErrNotFound) {
				r.fail(ru, rec, f.ForwardKey, fmt.Errorf("set mark: %w", err))
				return
			}
			f.Class, f.Detail = ClassPending, "record moved on"
		}
	}
	ru.rep.add(f)
	if f.Class != ClassReconciled {
		r.cfg.Logger.Info("reconcile: finding", "class", f.Class, "detail", f.Detail, "key_hash", keyHash(rec.Scope, rec.Key))
	}
}

// duplicate reports a key the provider lists more than once. An unknown
// record is first decided from the entries (the provider applied the key
// at least once); the record is then marked drift, so that the finding
// stays until a person resolves it.
func (r *Reconciler) duplicate(ctx context.Context, ru *run, rec idem.Record, f Finding, got Applied, undecided bool) {
	first := firstApplied(got)
	f.Class, f.Detail = ClassDuplicate, duplicateDetail(got)
	f.Provider, f.ProviderCurrency = appliedSum(got, first.Currency), first.Currency
	if undecided {
		d, err := decideUnknown(ctx, r.eng, rec, first, nil, r.policy(), ru.now)
		if err != nil {
			r.fail(ru, rec, f.ForwardKey, err)
			return
		}
		if d.rec == nil {
			f.Class, f.Detail = d.class, d.detail
			ru.rep.add(f)
			return
		}
		rec = *d.rec
	}
	if rec.State == idem.StateFailed {
		f.Local = 0
	}
	r.mark(ctx, ru, rec, f)
}

// entries lists a provider's entries under one key: got and its repeats.
func entries(got Applied) []Applied { return append([]Applied{got}, got.Repeats...) }

// firstApplied is the first applied entry under got's key, or got.
func firstApplied(got Applied) Applied {
	for _, e := range entries(got) {
		if e.Status == StatusApplied {
			return e
		}
	}
	return got
}

func anyApplied(got Applied) bool { return firstApplied(got).Status == StatusApplied }

// appliedSum is what the provider applied under got's key in cur.
func appliedSum(got Applied, cur string) int64 {
	var n int64
	for _, e := range entries(got) {
		if e.Status == StatusApplied && e.Currency == cur {
			n += e.Amount
		}
	}
	return n
}

func duplicateDetail(got Applied) string {
	es := entries(got)
	var lines []string
	for _, e := range es {
		if e.Line > 0 {
			lines = append(lines, strconv.Itoa(e.Line))
		}
	}
	where := ""
	if len(lines) > 0 {
		where = " (lines " + strings.Join(lines, ", ") + ")"
	}
	return fmt.Sprintf("the provider lists this key %d times%s: a possible double application", len(es), where)
}

// markClass is the class an earlier run's mark stands for, for the marks
// that call for a person.
var markClass = map[idem.Mark]Class{
	idem.MarkDrift:       ClassDrift,
	idem.MarkOverCounted: ClassOverCounted,
}

// cannotTell reports a decided record the provider could not be asked
// about. A record an earlier run marked drift or over_counted keeps that
// class (Kept): an outage of the provider must not make a finding that
// needs a person disappear from the report, its exit status and the
// metrics. Any other record counts as pending. Either way the error is
// reported.
func (r *Reconciler) cannotTell(ru *run, rec idem.Record, in *idem.Intent, f Finding, lerr error) {
	c, ok := markClass[rec.Mark]
	if !ok {
		if rec.State != idem.StateSucceeded {
			f.Local = 0
		}
		r.failWith(ru, rec, f, lerr)
		return
	}
	f.Class, f.Kept = c, true
	f.Detail = "kept from an earlier run: the provider could not tell this run"
	if rec.State != idem.StateSucceeded {
		f.Local = 0
	}
	ru.rep.add(f)
	r.errored(ru, rec, lerr)
}

// fail reports a per-key problem; the key counts as pending.
func (r *Reconciler) fail(ru *run, rec idem.Record, fk string, err error) {
	r.failWith(ru, rec, Finding{Scope: rec.Scope, Key: rec.Key, ForwardKey: fk, Age: ru.now.Sub(rec.CreatedAt)}, err)
}

// failWith reports a per-key problem with what the finding f already
// says of the key (its intent's amount); the key counts as pending.
func (r *Reconciler) failWith(ru *run, rec idem.Record, f Finding, err error) {
	f.Class, f.Detail = ClassPending, err.Error()
	f.Provider, f.ProviderCurrency = 0, ""
	ru.rep.add(f)
	r.errored(ru, rec, err)
}

// errored adds a per-key error to the report and the log.
func (r *Reconciler) errored(ru *run, rec idem.Record, err error) {
	ru.rep.Errors = append(ru.rep.Errors, fmt.Sprintf("%s: %v", rec.Key, err))
	r.cfg.Logger.Warn("reconcile: key not decided", "key_hash", keyHash(rec.Scope, rec.Key), "err", err)
}

func (r *Reconciler) policy() policy {
	return policy{window: r.cfg.SettlementWindow, notApplied: r.cfg.NotApplied, result: r.cfg.Result, actor: r.cfg.Actor}
}
