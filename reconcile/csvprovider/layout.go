package csvprovider

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/money"
)

// The fields a [Layout] maps to columns.
const (
	FieldKey       = "key"        // the forwarded key (required)
	FieldAmount    = "amount"     // the amount (required)
	FieldCurrency  = "currency"   // ISO 4217 code (required)
	FieldStatus    = "status"     // what happened; see Layout.Statuses
	FieldAppliedAt = "applied_at" // when (required)
	FieldType      = "type"       // the row's kind (charge, refund, payout, fee…)
	FieldScope     = "scope"      // the local scope of a key with no local record
	FieldReference = "reference"  // the provider's own id of the entry
	FieldTimeZone  = "timezone"   // the zone applied_at is written in
	FieldDebit     = "debit"      // a second amount column, read when amount is empty
)

// Fields lists the fields in the order they are documented.
var Fields = []string{FieldKey, FieldAmount, FieldCurrency, FieldStatus, FieldAppliedAt, FieldType,
	FieldScope, FieldReference, FieldTimeZone, FieldDebit}

// Outcome is what a row's status (or, without a status column, its type)
// means for the intent the row settles.
type Outcome string

// Row outcomes.
const (
	// OutcomeApplied: the key's effect happened.
	OutcomeApplied Outcome = "applied"
	// OutcomeFailed: the provider saw the key and declined it.
	OutcomeFailed Outcome = "failed"
	// OutcomeRefund: a refund of the key's order happened; the row is
	// matched to the refund's key (see Layout.RefundKey), not the charge.
	OutcomeRefund Outcome = "refund"
	// OutcomeSkip: the row settles no intent; it is counted, not matched.
	OutcomeSkip Outcome = "skip"
)

// ParseOutcome parses an outcome name.
func ParseOutcome(s string) (Outcome, error) {
	switch o := Outcome(s); o {
	case OutcomeApplied, OutcomeFailed, OutcomeRefund, OutcomeSkip:
		return o, nil
	}
	return "", fmt.Errorf("unknown outcome %q (want applied, failed, refund or skip)", s)
}

// Layout says how a settlement file's rows become entries: which column
// holds each field, how amounts and times are written, and which rows
// settle intents at all.
type Layout struct {
	// Name names the layout in errors ("stripe-balance").
	Name string
	// Columns maps each field to its header (compared case-insensitively,
	// a byte-order mark and surrounding spaces ignored). key, amount,
	// currency and applied_at are required, and status or type; a status
	// column the file lacks is read from its type column, when it has one.
	Columns map[string]string
	// Alternates lists, per field, further headers its column may have
	// when the header has none named in Columns, tried in order: one
	// layout reads a provider's reports whose headers differ (Stripe's
	// Dashboard export says "Amount", its Report API "gross"). Defaults
	// to none.
	Alternates map[string][]string
	// Optional lists the mapped fields whose column may be missing from
	// the header. Defaults to none.
	Optional []string
	// Amount says how amounts are written. Defaults to integer minor
	// units.
	Amount money.Format
	// Exponents overrides the currencies' decimal digits, where the
	// provider counts them differently from ISO 4217. Defaults to the
	// ISO 4217 table of package money.
	Exponents money.Exponents
	// Magnitude makes amounts unsigned: the row's type, not the sign,
	// says which way money moved (a refund's "-5.00" is a refund of 500).
	// Defaults to false: amounts keep their sign.
	Magnitude bool
	// TimeLayouts are the Go layouts applied_at may be written in, tried
	// in order. Defaults to RFC 3339.
	TimeLayouts []string
	// Location is the zone of a time written without one, when the row
	// has no timezone column. Defaults to UTC.
	Location *time.Location
	// Statuses maps a status value (or, with no status column, a type
	// value), compared case-insensitively, to its outcome. Other values
	// are read as reconcile.ParseStatus reads them; anything else is an
	// error naming the line. Defaults to none.
	Statuses map[string]Outcome
	// Types, when not empty, lists the type values that settle intents
	// (case-insensitive); other rows are skipped and counted as
	// "type <value>". Defaults to every row.
	Types []string
	// SkipKeyless counts a row with an empty key as skipped ("no key")
	// instead of refusing the file. Defaults to false.
	SkipKeyless bool
	// RefundKey derives the key of a refund from the key its row carries
	// (the charge's, as providers repeat the payment's reference on its
	// refunds). Defaults to [DefaultRefundKey].
	RefundKey func(key string) (string, error)
}

// DefaultRefundKey maps the key of a charge made with idem.DeriveKey,
// "<operation>:v<N>:<parts>", to the refund of the same order,
// "refund:v<N>:<parts>"; a key already in the refund namespace is kept. A
// key of another form has no derivable refund key (give a template with
// [RefundKeyTemplate]).
func DefaultRefundKey(key string) (string, error) {
	ns, rest, ok := splitDerived(key)
	if !ok {
		return "", fmt.Errorf("key %q is not of the form <operation>:v<N>:<parts>", key)
	}
	if ns == "refund" {
		return key, nil
	}
	return "refund:" + rest, nil
}

// RefundKeyTemplate returns a RefundKey that fills tmpl: "{key}" is the
// row's key and "{order}" the parts of a derived key after its version
// ("refund:v1:{order}" is [DefaultRefundKey] for version 1 keys).
func RefundKeyTemplate(tmpl string) (func(string) (string, error), error) {
	if !strings.Contains(tmpl, "{key}") && !strings.Contains(tmpl, "{order}") {
		return nil, fmt.Errorf("refund key template %q names neither {key} nor {order}", tmpl)
	}
	return func(key string) (string, error) {
		out := strings.ReplaceAll(tmpl, "{key}", key)
		if strings.Contains(tmpl, "{order}") {
			_, rest, ok := splitDerived(key)
			if !ok {
				return "", fmt.Errorf("key %q has no {order}: it is not of the form <operation>:v<N>:<parts>", key)
			}
			_, order, _ := strings.Cut(rest, ":")
			out = strings.ReplaceAll(out, "{order}", order)
		}
		return out, nil
	}, nil
}

// splitDerived splits "ns:vN:parts" into ns and "vN:parts".
func splitDerived(key string) (ns, rest string, ok bool) {
	ns, rest, ok = strings.Cut(key, ":")
	if !ok || ns == "" {
		return "", "", false
	}
	ver, parts, ok := strings.Cut(rest, ":")
	if !ok || parts == "" || len(ver) < 2 || ver[0] != 'v' || !digits(ver[1:]) {
		return "", "", false
	}
	return ns, rest, true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ParseMap applies "FIELD=COLUMN" to the layout's columns.
func (l *Layout) ParseMap(s string) error {
	field, col, ok := strings.Cut(s, "=")
	field = strings.TrimSpace(field)
	if !ok || strings.TrimSpace(col) == "" {
		return fmt.Errorf("want FIELD=COLUMN, got %q", s)
	}
	if !slices.Contains(Fields, field) {
		return fmt.Errorf("unknown field %q (want one of %s)", field, strings.Join(Fields, ", "))
	}
	cols := make(map[string]string, len(l.Columns)+1)
	for k, v := range l.Columns {
		cols[k] = v
	}
	cols[field] = col
	l.Columns = cols
	if _, ok := l.Alternates[field]; ok {
		alt := make(map[string][]string, len(l.Alternates))
		for k, v := range l.Alternates {
			if k != field { // the user named the column: no other is tried
				alt[k] = v
			}
		}
		l.Alternates = alt
	}
	l.Optional = slices.DeleteFunc(slices.Clone(l.Optional), func(f string) bool { return f == field })
	return nil
}

// ParseStatusMap adds "VALUE=OUTCOME,…" pairs to the layout's statuses.
func (l *Layout) ParseStatusMap(s string) error {
	st := make(map[string]Outcome, len(l.Statuses))
	for k, v := range l.Statuses {
		st[k] = v
	}
	for pair := range strings.SplitSeq(s, ",") {
		val, out, ok := strings.Cut(pair, "=")
		val = strings.ToLower(strings.TrimSpace(val))
		if !ok || val == "" {
			return fmt.Errorf("want VALUE=OUTCOME, got %q", pair)
		}
		o, err := ParseOutcome(strings.TrimSpace(out))
		if err != nil {
			return err
		}
		st[val] = o
	}
	l.Statuses = st
	return nil
}

// SetTypes sets the type values kept, from "a,b,c".
func (l *Layout) SetTypes(s string) {
	l.Types = nil
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			l.Types = append(l.Types, t)
		}
	}
}

// validate checks the layout itself, before any file is read.
func (l *Layout) validate() error {
	var errs []error
	for f := range l.Columns {
		if !slices.Contains(Fields, f) {
			errs = append(errs, fmt.Errorf("unknown field %q", f))
		}
	}
	for _, f := range []string{FieldKey, FieldAmount, FieldCurrency, FieldAppliedAt} {
		if l.Columns[f] == "" {
			errs = append(errs, fmt.Errorf("no column for %s", f))
		}
	}
	if l.Columns[FieldStatus] == "" && l.Columns[FieldType] == "" {
		errs = append(errs, errors.New("no column for status or type"))
	}
	if len(l.Types) > 0 && l.Columns[FieldType] == "" {
		errs = append(errs, errors.New("a type filter needs a column for type"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("layout %s: %w", l.name(), err)
	}
	return nil
}

// candidates are the headers field's column may have, in order.
func (l *Layout) candidates(field string) []string {
	var cs []string
	if c := l.Columns[field]; c != "" {
		cs = append(cs, c)
	}
	return append(cs, l.Alternates[field]...)
}

func (l *Layout) name() string {
	if l.Name == "" {
		return "csv"
	}
	return l.Name
}

// outcome is what the row's status (or type) value means.
func (l *Layout) outcome(v string) (Outcome, error) {
	lv := strings.ToLower(strings.TrimSpace(v))
	if o, ok := l.Statuses[lv]; ok {
		return o, nil
	}
	st, err := reconcile.ParseStatus(lv)
	if err != nil {
		return "", fmt.Errorf("status %q is not mapped to applied, failed, refund or skip", v)
	}
	if st == reconcile.StatusApplied {
		return OutcomeApplied, nil
	}
	return OutcomeFailed, nil
}

// keeps reports whether a row of type t settles an intent.
func (l *Layout) keeps(t string) bool {
	if len(l.Types) == 0 {
		return true
	}
	return slices.ContainsFunc(l.Types, func(k string) bool { return strings.EqualFold(k, strings.TrimSpace(t)) })
}
