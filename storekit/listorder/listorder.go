// Package listorder is the order of [idem.Store.List] for the stores that
// sort in Go (memstore, redisstore, natsstore, dynamostore): creation time, then scope, then key,
// the order of [idem.Cursor]. The SQL stores say the same in ORDER BY.
package listorder

import (
	"cmp"
	"slices"
	"strings"

	"github.com/idemkit/idem"
)

// Compare orders a and b: creation time, then scope, then key.
func Compare(a, b idem.Cursor) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key))
}

// Of is r's position in the order.
func Of(r *idem.Record) idem.Cursor {
	return idem.Cursor{CreatedAt: r.CreatedAt, Scope: r.Scope, Key: r.Key}
}

// Records orders two records, for slices.SortFunc.
func Records(a, b idem.Record) int { return Compare(Of(&a), Of(&b)) }

// After reports whether r comes after the cursor c; a nil c is before
// everything.
func After(r *idem.Record, c *idem.Cursor) bool { return c == nil || Compare(Of(r), *c) > 0 }

// Page sorts the records a List gathered into this order and keeps the
// first limit of them (all when limit is 0 or less): what List returns.
func Page(out []idem.Record, limit int) []idem.Record {
	slices.SortFunc(out, Records)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
