package reconcile

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"time"
)

// This file is the provider's view of the keys forwarded to it: an
// [Applied] entry per key and the small [Provider] interface that
// reconciliation and recovery ask. Packages csvprovider and httpprovider
// implement it.

// Errors a [Provider] returns.
var (
	// ErrNotApplied: the provider has no record of the key. Any other lookup
	// error means "cannot tell", and the record is left as it is.
	ErrNotApplied = errors.New("reconcile: provider has no record of the key")
	// ErrListUnsupported: the provider cannot list what it applied (an HTTP
	// lookup endpoint without a listing). The reconciler then checks local
	// records only and says so in the report.
	ErrListUnsupported = errors.New("reconcile: provider cannot list applied keys")
)

// Status is what a provider did with a key.
type Status string

// Provider statuses.
const (
	// StatusApplied: the effect happened (money moved, the message went out).
	StatusApplied Status = "applied"
	// StatusFailed: the provider saw the key and declined it; nothing moved.
	StatusFailed Status = "failed"
)

// ParseStatus parses a status as written in settlement files and lookup
// answers. "succeeded" and "settled" are accepted for applied, "declined"
// for failed, because processors spell them so.
func ParseStatus(s string) (Status, error) {
	switch s {
	case "applied", "succeeded", "settled":
		return StatusApplied, nil
	case "failed", "declined":
		return StatusFailed, nil
	}
	return "", errors.New("reconcile: unknown status " + strconv.Quote(s) + " (want applied or failed)")
}

// Applied is the provider's view of one key.
type Applied struct {
	// Key is the forwarded key the provider saw.
	Key string `json:"key"`
	// Scope is the local scope, when the provider knows it (a settlement
	// file may carry it); used only to record a key with no local record.
	Scope string `json:"scope,omitempty"`
	// Amount in integer minor units.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code, upper case.
	Currency string `json:"currency"`
	// Status says whether the effect happened.
	Status Status `json:"status"`
	// AppliedAt is when the provider applied (or declined) it.
	AppliedAt time.Time `json:"applied_at"`
	// Reference is the provider's own identifier of the entry (a Stripe
	// charge id, an Adyen PSP reference), when it has one.
	Reference string `json:"reference,omitempty"`
	// Result is the provider's raw answer, when it has one (an HTTP body).
	Result []byte `json:"-"`
	// Line is where the entry stands in a settlement file (its first line),
	// for people reading the report; 0 when the provider has no lines.
	Line int `json:"-"`
	// Repeats are the provider's further entries under the same key, in
	// its order (a settlement file listing the key again): a possible
	// double application at the provider. The reconciler reports such a
	// key as a finding of its own ([ClassDuplicate]).
	Repeats []Applied `json:"-"`
}

// SkippedRows is a group of provider rows left out of the comparison, and
// why.
type SkippedRows struct {
	// Reason says why, in a few words ("type payout", "no key", "older
	// than the look-back").
	Reason string `json:"reason"`
	// Rows is how many rows.
	Rows int `json:"rows"`
	// Unchecked is set for rows that may settle an intent idem made (a key
	// it cannot attribute, an entry older than the look-back): a duplicate
	// among them would not be seen, so a report with unchecked rows is
	// never clean. Rows that cannot hold one (payouts, fees, rows with no
	// key) are not.
	Unchecked bool `json:"unchecked,omitempty"`
	// Lines are the first lines of these rows in the provider's file (at
	// most [MaxSkippedLines]), when it has lines.
	Lines []int `json:"lines,omitempty"`
}

// MaxSkippedLines bounds [SkippedRows.Lines].
const MaxSkippedLines = 10

// RowSkipper is implemented by providers that read a file whose rows are
// not all settlements of intents (fees, payouts, adjustments, rows idem
// cannot attribute): it says which rows were left out, by reason, so that
// the report shows them rather than dropping them silently.
type RowSkipper interface {
	// SkippedRows returns the rows left out, one group per reason, in a
	// stable order. The caller must not modify them.
	SkippedRows() []SkippedRows
}

// OlderLister is implemented by providers that hold every entry they
// know (a settlement file): the reconciler also reads the entries applied
// before its look-back, so that those it could not compare are counted
// ("older than the look-back") instead of dropped silently.
type OlderLister interface {
	// AppliedBefore yields every entry applied before t, in any order.
	AppliedBefore(ctx context.Context, t time.Time) iter.Seq2[Applied, error]
}

// Provider is the provider's view, by forwarded key.
type Provider interface {
	// Lookup returns what the provider did with key, or ErrNotApplied when
	// it has no record of it. Any other error means the provider cannot
	// tell now.
	Lookup(ctx context.Context, key string) (Applied, error)
	// AppliedSince yields every entry the provider recorded at or after
	// since (zero: all), in any order. A provider that cannot list yields
	// ErrListUnsupported once.
	AppliedSince(ctx context.Context, since time.Time) iter.Seq2[Applied, error]
}
