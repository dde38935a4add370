// Package counts reads and writes record counts the way idem's benchmarks
// name them: "0", "10k", "1M" (k = 1,000, M = 1,000,000).
package counts

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseList parses a comma-separated list of counts such as "0,10k,1M",
// which must ascend. Empty items are skipped; an empty list is an error.
func ParseList(s string) ([]int64, error) {
	var out []int64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		mult := int64(1)
		switch {
		case strings.HasSuffix(p, "k") || strings.HasSuffix(p, "K"):
			mult, p = 1000, p[:len(p)-1]
		case strings.HasSuffix(p, "M"):
			mult, p = 1_000_000, p[:len(p)-1]
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || n > 1e12/mult {
			return nil, fmt.Errorf("size %q is not a count (write e.g. 10k or 1M)", p)
		}
		if len(out) > 0 && n*mult <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes must ascend: %d after %d", n*mult, out[len(out)-1])
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// Label writes n as ParseList reads it: 1M, 10k, or the digits.
func Label(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprint(n/1_000_000, "M")
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprint(n/1000, "k")
	}
	return fmt.Sprint(n)
}
