// Package listorder is the order of [idem.Store.List] for the stores that
// sort in Go (memstore, redisstore): creation time, then scope, then key,
// the order of [idem.Cursor]. The SQL stores say the same in ORDER BY.
package listorder

import (
	"cmp"
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
