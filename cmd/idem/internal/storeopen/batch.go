package storeopen

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Group commit is configured in the DSN's query, the same way for every
// SQL store:
//
//	batch=2ms        the batch window (a Go duration); absent or 0 is off
//	batch=eager      group commit without a window (groupcommit.Config.Eager)
//	batch_size=64    the most writes in one batch; the store's default if absent
//
// Both are validated by the store itself (limits and defaults live there).

// batchParams are the group-commit parameters of a DSN.
type batchParams struct {
	window time.Duration
	eager  bool
	size   int
}

// batchKeys are the query parameters parseBatch reads.
var batchKeys = []string{"batch", "batch_size"}

// parseBatch reads batch and batch_size from q.
func parseBatch(q url.Values) (batchParams, error) {
	var b batchParams
	if v := q.Get("batch"); v == "eager" {
		b.eager = true
	} else if v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return b, fmt.Errorf("batch=%q is not eager or a non-negative duration such as 2ms", v)
		}
		b.window = d
	}
	if v := q.Get("batch_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return b, fmt.Errorf("batch_size=%q is not a positive integer", v)
		}
		if b.window == 0 && !b.eager {
			return b, fmt.Errorf("batch_size=%s without batch=WINDOW or batch=eager: group commit is off", v)
		}
		b.size = n
	}
	return b, nil
}
