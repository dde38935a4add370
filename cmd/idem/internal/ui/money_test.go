package ui

import "testing"

// The dashboard prints money by each currency's ISO 4217 digits, and
// labels minor units it cannot place.
func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor int64
		cur   string
		want  string
	}{
		{125000, "EUR", "1250.00 EUR"},
		{-500, "eur", "-5.00 EUR"},
		{5000, "JPY", "5000 JPY"},
		{12345, "KWD", "12.345 KWD"},
		{150000, "COP", "1500.00 COP"},
		{1250, "", "1250 (minor units)"},
		{1250, "XYZ", "1250 XYZ (minor units)"},
	} {
		if got := formatAmount(tc.minor, tc.cur); got != tc.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tc.minor, tc.cur, got, tc.want)
		}
	}
}
