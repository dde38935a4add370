// Package money turns the amounts written in settlement files into integer
// minor units, exactly: decimal strings are parsed digit by digit (never
// through a float) and scaled by the currency's number of decimal digits.
//
// The digits come from the ISO 4217 table kept in this package (JPY 0,
// EUR 2, KWD 3, CLF 4), checked in its tests against the list the standard's
// maintenance agency publishes, with the codes of recent redenominations
// (MRU, SLE, VES, ZWG) and the withdrawn codes providers still send (MRO,
// SLL, VEF, HRK…). Where a provider counts a currency's digits differently
// from ISO 4217 (Stripe's API gives ISK two decimals; Adyen's gives CLP
// and ISK two, CVE and IDR none), say so with [Exponents]: amounts are
// compared in the minor units the application sent the provider.
//
// [Display] prints minor units as money ("12.50 EUR"), for people.
package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unit says how amounts are written.
type Unit int

// Amount units.
const (
	// Minor: integer minor units ("1250" is 12.50 EUR, "5000" is 5000 JPY).
	Minor Unit = iota
	// Major: decimal major units ("12.50" EUR, "5000" JPY, "1.250" KWD).
	Major
)

// ParseUnit parses "minor" or "major".
func ParseUnit(s string) (Unit, error) {
	switch s {
	case "minor":
		return Minor, nil
	case "major":
		return Major, nil
	}
	return 0, fmt.Errorf("unknown amount unit %q (want major or minor)", s)
}

func (u Unit) String() string {
	if u == Major {
		return "major"
	}
	return "minor"
}

// ErrCurrency is returned (wrapped) for a code that is not an ISO 4217
// currency, or one that has no minor units (gold, SDR, XXX).
var ErrCurrency = errors.New("not an ISO 4217 currency")

// Exponents overrides the number of decimal digits of some currencies
// (upper-case codes); it is consulted before the ISO 4217 table.
type Exponents map[string]int

// Exponent returns the number of decimal digits of the ISO 4217 currency
// code cur (upper case): 0 for JPY, 2 for EUR, 3 for KWD.
func (x Exponents) Exponent(cur string) (int, error) {
	if e, ok := x[cur]; ok {
		return e, nil
	}
	d, ok := digits(cur)
	switch {
	case !ok:
		return 0, fmt.Errorf("%q: %w", cur, ErrCurrency)
	case d < 0:
		return 0, fmt.Errorf("%q has no minor units in ISO 4217 (a unit of account or a metal): %w", cur, ErrCurrency)
	}
	return d, nil
}

// Known reports whether cur (upper case) is an ISO 4217 code in the table,
// current or withdrawn.
func Known(cur string) bool {
	_, ok := digits(cur)
	return ok
}

// Display prints an amount of minor units as money, for people: the major
// amount and the currency ("12.50 EUR", "-5.00 EUR", "5000 JPY",
// "12.345 KWD"). An amount without a currency, or in a code the ISO 4217
// table does not know or gives no minor units, is printed as minor units
// labelled so ("1250 (minor units)", "7 XAU (minor units)"): never a
// number that could be read as a major amount.
func Display(minor int64, cur string) string {
	exp, err := Exponent(cur)
	if err != nil {
		if cur == "" {
			return strconv.FormatInt(minor, 10) + " (minor units)"
		}
		return strconv.FormatInt(minor, 10) + " " + cur + " (minor units)"
	}
	return MajorString(minor, exp) + " " + cur
}

// MajorString writes minor units as a decimal major amount with exp fraction
// digits: MajorString(-500, 2) is "-5.00", MajorString(5000, 0) is "5000".
func MajorString(minor int64, exp int) string {
	neg := minor < 0
	u := uint64(minor)
	if neg {
		u = -u // also right for math.MinInt64
	}
	digits := strconv.FormatUint(u, 10)
	if exp > 0 {
		if len(digits) <= exp {
			digits = strings.Repeat("0", exp-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-exp] + "." + digits[len(digits)-exp:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// Exponent is [Exponents.Exponent] without overrides.
func Exponent(cur string) (int, error) { return Exponents(nil).Exponent(cur) }

// Format says how a settlement file writes numbers.
type Format struct {
	// Unit is Major or Minor. Defaults to Minor.
	Unit Unit
	// Decimal is the decimal separator of major-unit amounts. Defaults
	// to '.'.
	Decimal byte
	// Thousands, when not zero, is a grouping separator accepted between
	// groups of three digits ("1,250.00"). Defaults to none: a separator
	// is refused, so "1,250" is never read as 1.250 or 1250 by mistake.
	Thousands byte
}

// Parse returns s as integer minor units of a currency with exp decimal
// digits. It accepts an optional leading sign, the grouping separator
// between groups of three digits, and, in major units, at most exp
// fraction digits (more are accepted only when they are zeros: "12.500"
// EUR is 1250, "12.505" is refused, never rounded). Surrounding spaces are
// ignored. It never panics; an amount beyond int64 is an error.
func (f Format) Parse(s string, exp int) (int64, error) {
	dec := f.Decimal
	if dec == 0 {
		dec = '.'
	}
	if exp < 0 || exp > 18 {
		return 0, fmt.Errorf("exponent %d out of range", exp)
	}
	t := strings.TrimSpace(s)
	neg := false
	if t != "" && (t[0] == '-' || t[0] == '+') {
		neg = t[0] == '-'
		t = t[1:]
	}
	intPart, frac, hasFrac := t, "", false
	if i := strings.IndexByte(t, dec); i >= 0 {
		intPart, frac, hasFrac = t[:i], t[i+1:], true
	}
	if hasFrac && f.Unit == Minor {
		return 0, fmt.Errorf("%q has a fraction but amounts are in minor units", s)
	}
	digits, err := f.integerDigits(intPart)
	if err != nil || digits == "" || (hasFrac && frac == "") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if !allDigits(frac) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	scale := 0
	if f.Unit == Major {
		scale = exp
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return 0, fmt.Errorf("%q has more than %d decimals", s, scale)
		}
		frac = frac[:scale]
	}
	frac += strings.Repeat("0", scale-len(frac))
	var n uint64
	for _, c := range []byte(digits + frac) {
		d := uint64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n = n*10 + d
	}
	if neg {
		return -int64(n), nil
	}
	return int64(n), nil
}

// integerDigits strips valid grouping separators from the integer part.
func (f Format) integerDigits(s string) (string, error) {
	if f.Thousands == 0 || strings.IndexByte(s, f.Thousands) < 0 {
		if !allDigits(s) {
			return "", errors.New("not digits")
		}
		return s, nil
	}
	groups := strings.Split(s, string(f.Thousands))
	for i, g := range groups {
		if !allDigits(g) || g == "" || len(g) > 3 || (i > 0 && len(g) != 3) {
			return "", errors.New("bad grouping")
		}
	}
	return strings.Join(groups, ""), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
