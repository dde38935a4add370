package idem

import (
	"sort"
	"time"
)

// ValidateRetention checks that ttl covers every named window (the longest
// client retry chain, a queue's dead-letter replay window, a provider's
// dispute window…). It returns a [*RetentionError] naming the first window,
// by name, that ttl does not cover.
func ValidateRetention(ttl time.Duration, cover map[string]time.Duration) error {
	names := make([]string, 0, len(cover))
	for n := range cover {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if need := cover[n]; ttl < need {
			return &RetentionError{Window: n, Need: need, TTL: ttl}
		}
	}
	return nil
}
