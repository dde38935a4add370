package money_test

import (
	"encoding/xml"
	"errors"
	"os"
	"testing"

	"github.com/idemkit/idem/reconcile/money"
)

// publishedList reads testdata/iso4217-list-one.xml: ISO 4217 List One
// as its maintenance agency published it (see testdata/README.md).
func publishedList(t *testing.T) (published string, units map[string]string) {
	t.Helper()
	b, err := os.ReadFile("testdata/iso4217-list-one.xml")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Published string `xml:"Pblshd,attr"`
		Entries   []struct {
			Code  string `xml:"Ccy"`
			Units string `xml:"CcyMnrUnts"`
		} `xml:"CcyTbl>CcyNtry"`
	}
	if err := xml.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	units = map[string]string{}
	for _, e := range list.Entries {
		if e.Code == "" {
			continue // "No universal currency" (Antarctica, Palestine, …)
		}
		if u, dup := units[e.Code]; dup && u != e.Units {
			t.Fatalf("the list gives %s two minor units: %s and %s", e.Code, u, e.Units)
		}
		units[e.Code] = e.Units
	}
	return list.Published, units
}

// TestTableMatchesPublishedList checks every currency of the published
// ISO 4217 list against the table: the same minor units, and no minor
// units where the list says N.A.
func TestTableMatchesPublishedList(t *testing.T) {
	t.Parallel()
	published, units := publishedList(t)
	if published != "2024-06-25" || len(units) != 179 {
		t.Fatalf("testdata list published %s with %d codes; update the table and this test together", published, len(units))
	}
	for code, u := range units {
		got, err := money.Exponent(code)
		if u == "N.A." {
			if !errors.Is(err, money.ErrCurrency) {
				t.Errorf("%s: Exponent = %d, %v; the list gives no minor units", code, got, err)
			}
			continue
		}
		if err != nil || string(rune('0'+got)) != u {
			t.Errorf("%s: Exponent = %d, %v; the list says %s", code, got, err, u)
		}
		if !money.Known(code) {
			t.Errorf("%s: not Known", code)
		}
	}
}

// TestWithdrawnCodes: codes ISO 4217 withdrew after a redenomination stay
// readable, because providers still report them, beside their successors.
func TestWithdrawnCodes(t *testing.T) {
	t.Parallel()
	_, units := publishedList(t)
	for old, successor := range map[string]string{"MRO": "MRU", "SLL": "SLE", "STD": "STN", "VEF": "VES", "BYR": "BYN",
		"HRK": "EUR", "ZWL": "ZWG", "ZMK": "ZMW", "LTL": "EUR", "LVL": "EUR"} {
		if _, listed := units[old]; listed {
			t.Errorf("%s is in the current list; it belongs with the current codes", old)
		}
		if _, listed := units[successor]; !listed {
			t.Errorf("%s, successor of %s, is not in the current list", successor, old)
		}
		if !money.Known(old) {
			t.Errorf("withdrawn %s is not known", old)
		}
	}
}

func TestDisplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor int64
		cur   string
		want  string
	}{
		{125000, "EUR", "1250.00 EUR"},
		{500, "EUR", "5.00 EUR"},
		{-500, "EUR", "-5.00 EUR"},
		{5, "EUR", "0.05 EUR"},
		{-5, "EUR", "-0.05 EUR"},
		{0, "EUR", "0.00 EUR"},
		{5000, "JPY", "5000 JPY"},
		{12345, "KWD", "12.345 KWD"},
		{1, "CLF", "0.0001 CLF"},
		{150000, "COP", "1500.00 COP"},
		{-9223372036854775808, "EUR", "-92233720368547758.08 EUR"},
		{1250, "", "1250 (minor units)"},
		{1250, "XYZ", "1250 XYZ (minor units)"},
		{7, "XAU", "7 XAU (minor units)"},
	} {
		if got := money.Display(tc.minor, tc.cur); got != tc.want {
			t.Errorf("Display(%d, %q) = %q, want %q", tc.minor, tc.cur, got, tc.want)
		}
	}
}
