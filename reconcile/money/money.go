// Package money turns the amounts written in settlement files into integer
// minor units, exactly: decimal strings are parsed digit by digit (never
// through a float) and scaled by the currency's number of decimal digits.
//
// The digits come from golang.org/x/text/currency (the Unicode CLDR
// currency data, maintained with the Go project), not from a list kept
// here: JPY 0, EUR 2, KWD 3. CLDR follows ISO 4217 for nearly every
// currency; where a provider counts differently (CLDR gives IQD and RSD no
// decimals, ISO 4217 gives them 3 and 2), override the exponent with
// [Exponents].
package money

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"golang.org/x/text/currency"
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
	return 0, fmt.Errorf("money: unknown amount unit %q (want major or minor)", s)
}

func (u Unit) String() string {
	if u == Major {
		return "major"
	}
	return "minor"
}

// ErrCurrency is returned (wrapped) for a code that is not an ISO 4217
// currency.
var ErrCurrency = errors.New("money: not an ISO 4217 currency")

// Exponents overrides the number of decimal digits of some currencies
// (upper-case codes); it is consulted before the CLDR table.
type Exponents map[string]int

// Exponent returns the number of decimal digits of the ISO 4217 currency
// code cur (upper case): 0 for JPY, 2 for EUR, 3 for KWD.
func (x Exponents) Exponent(cur string) (int, error) {
	if e, ok := x[cur]; ok {
		return e, nil
	}
	if len(cur) != 3 || strings.ToUpper(cur) != cur {
		return 0, fmt.Errorf("%w: %q", ErrCurrency, cur)
	}
	u, err := currency.ParseISO(cur)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrCurrency, cur)
	}
	scale, _ := currency.Standard.Rounding(u)
	return scale, nil
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
		return 0, fmt.Errorf("money: exponent %d out of range", exp)
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
		return 0, fmt.Errorf("money: amount %q has a fraction but amounts are in minor units", s)
	}
	digits, err := f.integerDigits(intPart)
	if err != nil || digits == "" || (hasFrac && frac == "") {
		return 0, fmt.Errorf("money: amount %q is not a number", s)
	}
	if !allDigits(frac) {
		return 0, fmt.Errorf("money: amount %q is not a number", s)
	}
	scale := 0
	if f.Unit == Major {
		scale = exp
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return 0, fmt.Errorf("money: amount %q has more than %d decimals", s, scale)
		}
		frac = frac[:scale]
	}
	frac += strings.Repeat("0", scale-len(frac))
	var n uint64
	for _, c := range []byte(digits + frac) {
		d := uint64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("money: amount %q is too large", s)
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
