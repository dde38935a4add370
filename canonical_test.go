package idem

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCanonicalJSONForms(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		// Whitespace and member order.
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n", `{"a":[1,2]}`},
		{"member order", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"nested order", `{"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":2,"y":1}}`},
		{"prefix sorts first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"empty containers", `{ "a" : { } , "b" : [ ] }`, `{"a":{},"b":[]}`},
		{"scalar top level", ` true `, `true`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		// Names sort by decoded UTF-8 bytes, not by their escaped spelling.
		{"escaped quote sorts as 0x22", `{"#":1,"\"":2}`, `{"\"":2,"#":1}`},
		{"escaped backslash sorts as 0x5c", `{"]":1,"\\":2,"[":3}`, `{"[":3,"\\":2,"]":1}`},
		{"control escapes sort by value", `{"\u001f":1,"\n":2,"\u0010":3}`, `{"\n":2,"\u0010":3,"\u001f":1}`},
		{"unicode escape sorts as decoded", `{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		// UTF-8 order puts U+FFFF before U+1F600; UTF-16 order (RFC 8785) would not.
		{"utf-8 not utf-16 order", `{"😀":1,"\uffff":2}`, "{\"\uffff\":2,\"😀\":1}"},
		// Numbers: exact decimal value.
		{"one spellings", `[1,1.0,1e0,10e-1,1E+0,0.1e1,100e-2]`, `[1,1,1,1,1,1,1]`},
		{"negative zero", `[-0,-0.0,0e5,-0e-5,0.000]`, `[0,0,0,0,0]`},
		{"2^53+1 kept", `9007199254740993`, `9007199254740993`},
		{"long mantissa kept", `0.1000000000000000055511151231257827`, `0.1000000000000000055511151231257827`},
		{"integers up to 21 digits", `[100,1e2,123456789012345678901,1e20]`, `[100,100,123456789012345678901,100000000000000000000]`},
		{"exponent above 21 digits", `[1e21,1234567890123456789012,-15e30]`, `[1e+21,1.234567890123456789012e+21,-1.5e+31]`},
		{"fractions", `[1.5,-2.50,0.25,12.340]`, `[1.5,-2.5,0.25,12.34]`},
		{"small fractions", `[0.000001,1e-6,1e-7,-1.5e-7,0.0000001234]`, `[0.000001,0.000001,1e-7,-1.5e-7,1.234e-7]`},
		{"leading zero exponent", `1e0000000000000000000000002`, `100`},
		{"big exponent within range", `[1e999999999999999999,-2.5E-999999999999999999,100e999999999999999997]`, `[1e+999999999999999999,-2.5e-999999999999999999,1e+999999999999999999]`},
		{"zero with big exponent", `0e999999999999999999`, `0`},
		// Strings: unescaped, then re-escaped minimally.
		{"escapes decoded", `"\u00e9\/\u0041"`, `"é/A"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"upper-case hex", `"\u00E9\uD83D\uDE00"`, `"é😀"`},
		{"control chars", `"\u0008\u000c\u000a\u000d\u0009\u0000\u001F"`, `"\b\f\n\r\t\u0000\u001f"`},
		{"quote and backslash", `"\u0022\u005c"`, `"\"\\"`},
		{"raw non-ascii kept", `"日本 é"`, `"日本 é"`},
		{"DEL and U+2028 unescaped", `"\u007f\u2028"`, "\"\x7f\u2028\""},
		{"U+FFFD itself is fine", `"\ufffd�"`, `"��"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("CanonicalJSON(%q) = %s, want %s", tc.in, got, tc.want)
			}
			again, err := CanonicalJSON(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s -> %s, %v", got, again, err)
			}
		})
	}
}

// Inputs that mean different things must never canonicalise alike.
func TestCanonicalJSONKeepsDifferences(t *testing.T) {
	for _, pair := range [][2]string{
		{`9007199254740992`, `9007199254740993`},
		{`0.1`, `0.10000000000000001`}, // equal as float64
		{`1e400`, `1e401`},             // both +Inf as float64
		{`1`, `"1"`},
		{`1`, `10`},
		{`10`, `0.1`},
		{`-1`, `1`},
		{`1.5`, `15`},
		{`null`, `"null"`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":1}`, `{"A":1}`},
		{`["a","b"]`, `["b","a"]`},
		{`"\u00e9"`, `"e\u0301"`}, // no Unicode normalisation
		{`"a\u0000"`, `"a"`},
		{`{"a\"":1}`, `{"a\\":1}`},
	} {
		a, errA := CanonicalJSON([]byte(pair[0]))
		b, errB := CanonicalJSON([]byte(pair[1]))
		if errA != nil || errB != nil {
			t.Fatalf("%s / %s: %v, %v", pair[0], pair[1], errA, errB)
		}
		if string(a) == string(b) {
			t.Errorf("%s and %s both canonicalise to %s", pair[0], pair[1], a)
		}
	}
}

func TestCanonicalJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		offset   int
		dup      bool
	}{
		{"empty", ``, 0, false},
		{"only whitespace", " \n ", 3, false},
		{"trailing garbage", `{} x`, 3, false},
		{"two values", `1 2`, 2, false},
		{"duplicate", `{"a":1,"a":2}`, 7, true},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`, 7, true},
		{"duplicate out of order", `{"b":1,"a":2,"b":3}`, 13, true},
		{"duplicate nested", `[{"x":{"k":1,"j":2,"k":3}}]`, 19, true},
		{"duplicate same value", `{"a":1,"a":1}`, 7, true},
		{"exponent out of range", `1e1000000000000000000`, 2, false},
		{"negative exponent out of range", `[1E-0001000000000000000000]`, 7, false},
		{"value exponent out of range", `[1,1000e999999999999999997]`, 3, false},
		{"value exponent just out of range", `10e999999999999999999`, 0, false},
		{"small value exponent out of range", `-0.1e-999999999999999999`, 0, false},
		{"lone high surrogate", `"\ud800"`, 1, false},
		{"high surrogate then letter", `"\ud800x"`, 1, false},
		{"high surrogate then non-low", `"\ud800\u0041"`, 1, false},
		{"lone low surrogate", `"\udc00"`, 1, false},
		{"reversed pair", `"\ude00\ud83d"`, 1, false},
		{"two low surrogates", `"\udc00\udc00"`, 1, false},
		{"invalid utf-8", "\"a\xffb\"", 2, false},
		{"utf-8 encoded surrogate", "\"\xed\xa0\x80\"", 1, false},
		{"overlong utf-8", "\"\xc0\xaf\"", 1, false},
		{"truncated utf-8", "\"\xe6\x97\"", 1, false},
		{"raw control char", "\"a\tb\"", 2, false},
		{"bad escape", `"\x"`, 1, false},
		{"short unicode escape", `"\u12"`, 1, false},
		{"bad hex", `"\u12g4"`, 1, false},
		{"unterminated string", `"abc`, 4, false},
		{"unterminated array", `[1,2`, 4, false},
		{"unterminated object", `{"a":1`, 6, false},
		{"trailing comma array", `[1,]`, 3, false},
		{"trailing comma object", `{"a":1,}`, 7, false},
		{"missing colon", `{"a" 1}`, 5, false},
		{"non-string name", `{1:2}`, 1, false},
		{"leading zero", `01`, 1, false},
		{"plus sign", `+1`, 0, false},
		{"bare minus", `-`, 1, false},
		{"dot without digits", `1.`, 2, false},
		{"leading dot", `.5`, 0, false},
		{"exponent without digits", `1e+`, 3, false},
		{"NaN", `NaN`, 0, false},
		{"bad literal", `tru`, 0, false},
		{"single quotes", `'a'`, 0, false},
		{"BOM", "\xef\xbb\xbf{}", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := CanonicalJSON([]byte(tc.in))
			if err == nil {
				t.Fatalf("CanonicalJSON(%q) = %s, want an error", tc.in, out)
			}
			if !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("error %v does not match ErrInvalidJSON", err)
			}
			if got := errors.Is(err, ErrDuplicateMember); got != tc.dup {
				t.Errorf("errors.Is(%v, ErrDuplicateMember) = %v, want %v", err, got, tc.dup)
			}
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error %T is not a *JSONError", err)
			}
			if je.Offset != tc.offset {
				t.Errorf("offset = %d, want %d (%v)", je.Offset, tc.offset, err)
			}
		})
	}
}

func TestCanonicalJSONErrorDoesNotEchoInput(t *testing.T) {
	_, err := CanonicalJSON([]byte(`{"card":"4242424242424242","card":"x"}`))
	if err == nil || strings.Contains(err.Error(), "4242") || strings.Contains(err.Error(), "card") {
		t.Errorf("error %v echoes the body", err)
	}
}

func TestCanonicalJSONDepth(t *testing.T) {
	nest := func(n int, open, close string) []byte {
		return []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
	}
	for _, brackets := range [][2]string{{"[", "]"}, {`{"a":`, "}"}} {
		if _, err := CanonicalJSON(nest(MaxJSONDepth, brackets[0], brackets[1])); err != nil {
			t.Errorf("%s depth %d refused: %v", brackets[0], MaxJSONDepth, err)
		}
		if _, err := CanonicalJSON(nest(MaxJSONDepth+1, brackets[0], brackets[1])); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%s depth %d: err = %v, want ErrInvalidJSON", brackets[0], MaxJSONDepth+1, err)
		}
		// Far deeper than any stack would take: refused, not a crash.
		if _, err := CanonicalJSON(nest(1_000_000, brackets[0], brackets[1])); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%s depth 1e6: err = %v, want ErrInvalidJSON", brackets[0], err)
		}
	}
}

func TestAppendCanonicalJSON(t *testing.T) {
	dst := []byte("prefix:")
	out, err := AppendCanonicalJSON(dst, []byte(`{"b":2,"a":1}`))
	if err != nil || string(out) != `prefix:{"a":1,"b":2}` {
		t.Fatalf("AppendCanonicalJSON = %q, %v", out, err)
	}
	out, err = AppendCanonicalJSON(dst, []byte(`{"b":2,"b":1}`))
	if err == nil || string(out) != "prefix:" {
		t.Errorf("on error AppendCanonicalJSON = %q, %v; want dst unchanged and an error", out, err)
	}
}

func TestJSONErrorIs(t *testing.T) {
	plain := &JSONError{Offset: 3, Reason: "x"}
	if !errors.Is(plain, ErrInvalidJSON) || errors.Is(plain, ErrDuplicateMember) || errors.Is(plain, ErrInvalidKey) {
		t.Errorf("plain JSONError matches wrongly")
	}
	if got := plain.Error(); got != "idem: invalid JSON at offset 3: x" {
		t.Errorf("Error() = %q", got)
	}
}

// bench200 is a typical 200-byte request body, members out of order.
const bench200 = `{"amount": 5000, "currency": "EUR", "customer": "cus_9s6XKzkNRiz8i3",
 "description": "Order #1234 for Jane Doe", "metadata": {"order_id": "1234", "attempt": 1},
 "capture": true, "items": [1, 2.50, 3e2]}`

func BenchmarkCanonicalJSON200(b *testing.B) {
	src := []byte(bench200)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CanonicalJSON(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendCanonicalJSON200(b *testing.B) {
	src := []byte(bench200)
	dst := make([]byte, 0, 512)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = AppendCanonicalJSON(dst[:0], src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprintBodyJSON200(b *testing.B) {
	src := []byte(bench200)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := FingerprintBody("POST", "/v1/charges", src, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONValid200 is the yardstick: encoding/json only validating the
// same body. On a shared machine compare ratios, not absolute numbers.
func BenchmarkJSONValid200(b *testing.B) {
	src := []byte(bench200)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(src) {
			b.Fatal("invalid")
		}
	}
}

// Objects above the insertion-sort size take the other sorting path.
func TestCanonicalJSONLargeObject(t *testing.T) {
	for _, n := range []int{2, 31, 32, 33, 200} {
		var in, want strings.Builder
		in.WriteByte('{')
		want.WriteByte('{')
		for i := range n {
			if i > 0 {
				in.WriteByte(',')
				want.WriteByte(',')
			}
			fmt.Fprintf(&in, `"k%04d":%d`, n-1-i, n-1-i)
			fmt.Fprintf(&want, `"k%04d":%d`, i, i)
		}
		in.WriteByte('}')
		want.WriteByte('}')
		got, err := CanonicalJSON([]byte(in.String()))
		if err != nil || string(got) != want.String() {
			t.Errorf("%d members reversed: %s, %v", n, got, err)
		}
		// A duplicate of the first member, placed last: the farthest apart.
		dup := in.String()[:in.Len()-1] + fmt.Sprintf(`,"k%04d":0}`, n-1)
		if _, err := CanonicalJSON([]byte(dup)); !errors.Is(err, ErrDuplicateMember) {
			t.Errorf("%d members plus a duplicate: err = %v, want ErrDuplicateMember", n, err)
		}
	}
}

// The canonicaliser's scratch state is pooled: concurrent callers must not
// see each other's buffers (run with -race).
func TestCanonicalJSONConcurrent(t *testing.T) {
	inputs := []string{`{"b":[1,{"d":1,"c":2}],"a":1}`, `{"z":"x","y":1e3}`, bench200}
	want := make([]string, len(inputs))
	for i, in := range inputs {
		out, err := CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = string(out)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(inputs)
				out, err := CanonicalJSON([]byte(inputs[i]))
				if err != nil || string(out) != want[i] {
					errs <- fmt.Sprintf("%s -> %s, %v", inputs[i], out, err)
					return
				}
				if _, _, err := FingerprintBody("POST", "/", []byte(inputs[i]), true); err != nil {
					errs <- err.Error()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
