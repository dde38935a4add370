package reconcile

import "github.com/idemkit/idem/reconcile/ledger"

// The provider vocabulary, defined in package ledger (so that provider
// implementations and this package's command do not import each other) and
// re-exported here.
type (
	// Provider is the provider's view, by forwarded key. See [ledger.Provider].
	Provider = ledger.Provider
	// Applied is the provider's view of one key. See [ledger.Applied].
	Applied = ledger.Applied
	// Status is what a provider did with a key. See [ledger.Status].
	Status = ledger.Status
	// RowSkipper is [ledger.RowSkipper].
	RowSkipper = ledger.RowSkipper
)

// Provider statuses and errors; see package ledger.
const (
	StatusApplied = ledger.StatusApplied
	StatusFailed  = ledger.StatusFailed
)

var (
	// ErrNotApplied: the provider has no record of the key.
	ErrNotApplied = ledger.ErrNotApplied
	// ErrListUnsupported: the provider cannot list what it applied.
	ErrListUnsupported = ledger.ErrListUnsupported
)

// ParseStatus parses a provider status; see [ledger.ParseStatus].
func ParseStatus(s string) (Status, error) { return ledger.ParseStatus(s) }
