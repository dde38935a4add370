package money_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idem/reconcile/money"
)

func TestExponent(t *testing.T) {
	t.Parallel()
	// COP, IDR and IQD are where CLDR's data (golang.org/x/text, used
	// before) gave 0 digits; MRU, SLE, VES and ZWG it did not know.
	for cur, want := range map[string]int{"JPY": 0, "EUR": 2, "USD": 2, "KWD": 3, "BHD": 3, "CLP": 0, "CLF": 4,
		"COP": 2, "IDR": 2, "IQD": 3, "RSD": 2, "ISK": 0, "UGX": 0, "MRU": 2, "SLE": 2, "VES": 2, "VED": 2, "ZWG": 2,
		"MRO": 2, "SLL": 2, "VEF": 2, "HRK": 2, "BYR": 0, "XCG": 2} {
		if got, err := money.Exponent(cur); err != nil || got != want {
			t.Errorf("Exponent(%s) = %d, %v; want %d", cur, got, err, want)
		}
	}
	for _, cur := range []string{"", "EU", "EURO", "eur", "ABC", "€", "XAU", "XXX", "XDR"} {
		if _, err := money.Exponent(cur); !errors.Is(err, money.ErrCurrency) {
			t.Errorf("Exponent(%q): err = %v, want ErrCurrency", cur, err)
		}
	}
	if got, _ := (money.Exponents{"ISK": 2}).Exponent("ISK"); got != 2 {
		t.Errorf("override: ISK exponent = %d, want 2", got)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	major := money.Format{Unit: money.Major}
	grouped := money.Format{Unit: money.Major, Thousands: ','}
	comma := money.Format{Unit: money.Major, Decimal: ',', Thousands: '.'}
	minor := money.Format{}
	for _, tc := range []struct {
		f    money.Format
		in   string
		exp  int
		want int64
	}{
		{major, "12.50", 2, 1250},
		{major, "12.5", 2, 1250},
		{major, "12", 2, 1200},
		{major, "-5.00", 2, -500},
		{major, "+5.00", 2, 500},
		{major, " 0.01 ", 2, 1},
		{major, "12.500", 2, 1250},
		{major, "5000", 0, 5000},
		{major, "5000.0", 0, 5000},
		{major, "1.250", 3, 1250},
		{major, "0.005", 3, 5},
		{grouped, "1,250.00", 2, 125000},
		{grouped, "-12,345,678.9", 2, -1234567890},
		{grouped, "999.99", 2, 99999},
		{comma, "1.250,75", 2, 125075},
		{minor, "1250", 2, 1250},
		{minor, "-500", 2, -500},
		{major, "92233720368547758.07", 2, 9223372036854775807},
	} {
		got, err := tc.f.Parse(tc.in, tc.exp)
		if err != nil || got != tc.want {
			t.Errorf("%+v.Parse(%q, %d) = %d, %v; want %d", tc.f, tc.in, tc.exp, got, err, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	major := money.Format{Unit: money.Major}
	grouped := money.Format{Unit: money.Major, Thousands: ','}
	for _, tc := range []struct {
		f    money.Format
		in   string
		exp  int
		want string
	}{
		{major, "", 2, "not a number"},
		{major, "-", 2, "not a number"},
		{major, "12.", 2, "not a number"},
		{major, ".50", 2, "not a number"},
		{major, "12.505", 2, "more than 2 decimals"},
		{major, "5000.5", 0, "more than 0 decimals"},
		{major, "1,250.00", 2, "not a number"}, // no grouping in this format
		{grouped, "1,25.00", 2, "not a number"},
		{grouped, "1250,000", 2, "not a number"},
		{grouped, ",250", 2, "not a number"},
		{major, "1e3", 2, "not a number"},
		{major, "12.5O", 2, "not a number"},
		{major, "--5", 2, "not a number"},
		{major, "92233720368547758.08", 2, "too large"},
		{money.Format{}, "12.50", 2, "minor units"},
	} {
		_, err := tc.f.Parse(tc.in, tc.exp)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Parse(%q, %d): err = %v, want it to mention %q", tc.f, tc.in, tc.exp, err, tc.want)
		}
	}
}

// FuzzParse checks that any string either fails or gives the amount its
// digits say: formatting the result back and parsing it again agrees, and
// major units scale minor ones by 10^exp exactly.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"12.50", "-1,250.00", "5000", "0.005", "1.250,75", "92233720368547758.07", "+0", ""} {
		f.Add(s, uint8(2), true, byte(','))
	}
	f.Fuzz(func(t *testing.T, s string, exp uint8, major bool, thousands byte) {
		fm := money.Format{Thousands: thousands}
		if major {
			fm.Unit = money.Major
		}
		if thousands == '.' || (thousands >= '0' && thousands <= '9') || thousands == '-' || thousands == '+' {
			fm.Thousands = 0
		}
		e := int(exp % 5)
		n, err := fm.Parse(s, e)
		if err != nil {
			return
		}
		// The canonical spelling of n parses to n again.
		canon := strconv.FormatInt(n, 10)
		if major && e > 0 {
			neg := n < 0
			digits := strings.TrimPrefix(canon, "-")
			digits = strings.Repeat("0", max(0, e+1-len(digits))) + digits
			canon = digits[:len(digits)-e] + "." + digits[len(digits)-e:]
			if neg {
				canon = "-" + canon
			}
		}
		back, err := fm.Parse(canon, e)
		if err != nil || back != n {
			t.Fatalf("Parse(%q) = %d; its canonical form %q parses to %d, %v", s, n, canon, back, err)
		}
	})
}
