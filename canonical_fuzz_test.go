package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalJSON checks the canonicaliser against encoding/json, which
// is an independent parser: whatever CanonicalJSON accepts is valid JSON,
// means the same after canonicalisation (numbers compared exactly, as
// big.Rat), is canonical already (idempotence), and whatever encoding/json
// accepts is accepted unless it breaks one of the documented stricter rules.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,-0,1e2,"\u00e9"]}`, `[]`, `"\ud83d\ude00"`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted input that encoding/json refuses: %q -> %q", in, out)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q -> %q", in, out)
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, out); err != nil || !bytes.Equal(compact.Bytes(), out) {
			t.Fatalf("output has insignificant whitespace: %q", out)
		}
		a, _, err := decodeTree(in)
		if err != nil {
			t.Fatalf("encoding/json cannot decode accepted input %q: %v", in, err)
		}
		b, info, err := decodeTree(out)
		if err != nil {
			t.Fatalf("encoding/json cannot decode output %q: %v", out, err)
		}
		if !info.sorted {
			t.Fatalf("output members are not in byte order: %q", out)
		}
		if !sameTree(a, b) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

// checkRefusal fails unless the refusal of in is well-formed and justified
// by a documented rule.
func checkRefusal(t *testing.T, in []byte, err error) {
	t.Helper()
	var je *JSONError
	if !errors.As(err, &je) || !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("error %v (%T) is not a *JSONError matching ErrInvalidJSON", err, err)
	}
	if je.Offset < 0 || je.Offset > len(in) {
		t.Fatalf("offset %d outside input of %d bytes", je.Offset, len(in))
	}
	if !json.Valid(in) {
		return
	}
	_, info, derr := decodeTree(in)
	if derr != nil {
		t.Fatalf("encoding/json validates but cannot decode %q: %v", in, derr)
	}
	// encoding/json replaces invalid UTF-8 and lone surrogates with U+FFFD,
	// so it may see duplicates that are really a string error: check the
	// other rules first.
	switch {
	case !utf8.Valid(in), hasLoneSurrogate(in), info.depth > MaxJSONDepth, info.hugeExponent:
	case info.duplicate:
		if !errors.Is(err, ErrDuplicateMember) {
			t.Fatalf("duplicate member reported as %v", err)
		}
	default:
		t.Fatalf("refused valid JSON %q: %v", in, err)
	}
}

// treeInfo describes a decoded document.
type treeInfo struct {
	duplicate    bool // some object names a member twice
	depth        int  // deepest nesting of arrays and objects
	hugeExponent bool // some number has an exponent beyond maxExpDigits digits
	sorted       bool // every object's members are in strictly rising byte order
}

// jsonObject is a decoded JSON object; arrays are []any, numbers json.Number.
type jsonObject map[string]any

func decodeTree(in []byte) (any, treeInfo, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	info := treeInfo{sorted: true}
	v, err := decodeValue(dec, &info, 0)
	return v, info, err
}

func decodeValue(dec *json.Decoder, info *treeInfo, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		info.depth = max(info.depth, depth+1)
		if tok == '[' {
			return decodeArray(dec, info, depth+1)
		}
		return decodeObject(dec, info, depth+1)
	case json.Number:
		info.hugeExponent = info.hugeExponent || hugeExponent(string(tok))
	}
	return tok, nil
}

func decodeArray(dec *json.Decoder, info *treeInfo, depth int) (any, error) {
	arr := []any{}
	for dec.More() {
		v, err := decodeValue(dec, info, depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	_, err := dec.Token() // ']'
	return arr, err
}

func decodeObject(dec *json.Decoder, info *treeInfo, depth int) (any, error) {
	obj := jsonObject{}
	prev, first := "", true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := tok.(string)
		if _, dup := obj[name]; dup {
			info.duplicate = true
		}
		if !first && name <= prev {
			info.sorted = false
		}
		prev, first = name, false
		if obj[name], err = decodeValue(dec, info, depth); err != nil {
			return nil, err
		}
	}
	_, err := dec.Token() // '}'
	return obj, err
}

// hugeExponent reports whether the number literal num has an exponent of
// more than maxExpDigits digits, or a value d.ddd×10^n with n that large.
func hugeExponent(num string) bool {
	mant, exp := strings.TrimPrefix(num, "-"), int64(0)
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		e := strings.TrimLeft(strings.TrimLeft(mant[i+1:], "+-"), "0")
		if len(e) > maxExpDigits {
			return true
		}
		exp, _ = strconv.ParseInt(strings.TrimPrefix(mant[i+1:], "+"), 10, 64)
		mant = mant[:i]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	var n int64 // the value is d.ddd×10^n
	if lead := strings.TrimLeft(intPart, "0"); lead != "" {
		n = exp + int64(len(lead)) - 1
	} else if j := strings.IndexFunc(frac, func(r rune) bool { return r != '0' }); j >= 0 {
		n = exp - int64(j) - 1
	} else {
		return false // zero
	}
	return n >= 1e18 || n <= -1e18
}

// hasLoneSurrogate reports whether a string in the valid JSON in has a \u
// escape for a surrogate that is not part of a pair.
func hasLoneSurrogate(in []byte) bool {
	inString := false
	for i := 0; i < len(in); i++ {
		switch {
		case !inString:
			inString = in[i] == '"'
		case in[i] == '"':
			inString = false
		case in[i] == '\\' && in[i+1] != 'u':
			i++
		case in[i] == '\\':
			r, _ := strconv.ParseUint(string(in[i+2:i+6]), 16, 32)
			switch {
			case r >= 0xdc00 && r < 0xe000:
				return true
			case r >= 0xd800 && r < 0xdc00:
				if i+12 > len(in) || in[i+6] != '\\' || in[i+7] != 'u' {
					return true
				}
				lo, _ := strconv.ParseUint(string(in[i+8:i+12]), 16, 32)
				if lo < 0xdc00 || lo >= 0xe000 {
					return true
				}
				i += 6
			}
			i += 5
		}
	}
	return false
}

func sameTree(a, b any) bool {
	switch a := a.(type) {
	case jsonObject:
		b, ok := b.(jsonObject)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !sameTree(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, sameTree)
	case json.Number:
		b, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(b))
	}
	return a == b
}

// sameNumber compares two JSON numbers exactly as m×10^e with big.Rat
// mantissas, without building 10^e for exponents too far apart to matter.
func sameNumber(a, b string) bool {
	ma, ea := splitNumber(a)
	mb, eb := splitNumber(b)
	if ma.Sign() == 0 || mb.Sign() == 0 {
		return ma.Sign() == mb.Sign()
	}
	// |m| lies within 10^±(digits), so a larger exponent gap cannot close.
	k := ea - eb
	if bound := int64(len(a) + len(b)); k > bound || k < -bound {
		return false
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(k)), nil))
	if k >= 0 {
		ma.Mul(ma, scale)
	} else {
		mb.Mul(mb, scale)
	}
	return ma.Cmp(mb) == 0
}

func splitNumber(s string) (*big.Rat, int64) {
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		var err error
		if exp, err = strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64); err != nil {
			panic(fmt.Sprintf("exponent of %q: %v", s, err))
		}
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		panic("bad mantissa " + mant)
	}
	return r, exp
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// The helpers above are themselves load-bearing: check them on known cases.
func TestFuzzHelpers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"1", "1.0", true}, {"1e2", "100", true}, {"-0", "0e9", true}, {"10e-1", "1", true},
		{"9007199254740993", "9007199254740992", false}, {"1e400", "1e401", false},
		{"1e999999999999999999", "1e-999999999999999999", false}, {"-1", "1", false},
		{"1.5e-7", "0.00000015", true},
	} {
		if got := sameNumber(tc.a, tc.b); got != tc.same {
			t.Errorf("sameNumber(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
	for in, want := range map[string]bool{
		`"\ud800"`: true, `"\udc00"`: true, `"\ud83d\ude00"`: false, `"\\ud800"`: false,
		`"\ud800\u0041"`: true, `["\ud83d\ude00\udc00"]`: true, `"a\"\ud800"`: true, `"\u00e9"`: false,
	} {
		if got := hasLoneSurrogate([]byte(in)); got != want {
			t.Errorf("hasLoneSurrogate(%s) = %v", in, got)
		}
	}
	if _, info, _ := decodeTree([]byte(`{"a":{"b":1,"b":2}}`)); !info.duplicate || info.depth != 2 {
		t.Errorf("decodeTree info = %+v", info)
	}
	for num, want := range map[string]bool{
		"1e999999999999999999": false, "10e999999999999999999": true, "1000E000000000999999999999999997": true,
		"0.01e-999999999999999997": false, "0.01e-999999999999999998": true, "0e9999999999999999999": true,
		"0.0e999999999999999999": false, "-12.5": false,
	} {
		if got := hugeExponent(num); got != want {
			t.Errorf("hugeExponent(%s) = %v", num, got)
		}
	}
	if _, info, _ := decodeTree([]byte(`{"b":1,"a":2}`)); info.sorted {
		t.Error("decodeTree missed unsorted members")
	}
}
