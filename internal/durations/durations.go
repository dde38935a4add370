// Package durations parses the durations idem's command-line tools accept:
// time.ParseDuration's syntax plus a day unit, because retention and
// settlement windows are counted in days.
package durations

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const (
	day = 24 * time.Hour
	max = time.Duration(math.MaxInt64)
)

// Parse is time.ParseDuration plus a leading "d" (24h) unit, e.g. "30d" or
// "1d12h". Negative durations are refused, and so are durations past
// about 292 years (106751d), which time.Duration cannot hold: a day count
// is checked before it is multiplied, so it never wraps around silently.
func Parse(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		switch {
		case days < 0 || err != nil && !errors.Is(err, strconv.ErrRange):
			return 0, fmt.Errorf("invalid duration %q", s)
		case err != nil || days > int64(max/day):
			return 0, tooLong(s)
		}
		d := time.Duration(days) * day
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			if r > max-d {
				return 0, tooLong(s)
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use e.g. 30s, 15m, 24h, 30d)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return d, nil
}

func tooLong(s string) error {
	return fmt.Errorf("duration %q is too long: at most %dd (about 292 years)", s, max/day)
}
