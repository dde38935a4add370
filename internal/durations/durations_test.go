package durations

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "15m": 15 * time.Minute, "3d": 72 * time.Hour, "1d12h": 36 * time.Hour,
		"0": 0, "106751d": 106751 * day, "106751d23h47m16s": 106751*day + 23*time.Hour + 47*time.Minute + 16*time.Second,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"213504d": "too long", "106752d": "too long", "106751d24h": "too long", "99999999999999999999d": "too long",
		"-1d": "invalid", "-5m": "negative", "d": "invalid", "3x": "invalid", "1d-1h": "invalid", "": "invalid",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

// FuzzParse: no input panics, and an accepted duration is never negative
// (an overflow would wrap to one).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"3d", "1d12h", "213504d", "106751d23h47m16s", "-1d", "9223372036854775807ns", "1e3d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err == nil && d < 0 {
			t.Fatalf("Parse(%q) = %v", s, d)
		}
	})
}
