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
}

// RowSkipper is implemented by providers that read a file whose rows are
// not all settlements of intents (fees, payouts, adjustments): it says how
// many rows were left out, by reason, so that the report shows them rather
// than dropping them silently.
type RowSkipper interface {
	// SkippedRows returns the number of rows left out per reason
	// ("type payout", "no key"). The caller must not modify the map.
	SkippedRows() map[string]int
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
