package idemlambda

import (
	"errors"
	"testing"
)

// FuzzPointer: any pointer parses or is refused with ErrPointer, and a
// parsed one looks anything up without panicking, finding a value or
// saying ErrPointer.
func FuzzPointer(f *testing.F) {
	for _, s := range [][2]string{
		{"/body/order_id", `{"body":"{\"order_id\":\"o-1\"}"}`},
		{"/a~1b/0/~0c", `{"a/b":[{"~c":1}]}`},
		{"", `null`},
		{"/x/", `{"x":{"":true}}`},
		{"a", `{}`},
		{"/~2", `{}`},
		{"/n/01", `{"n":[1,2]}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ptr, doc string) {
		p, err := ParsePointer(ptr)
		if err != nil {
			if !errors.Is(err, ErrPointer) {
				t.Fatalf("ParsePointer(%q) = %v, want ErrPointer", ptr, err)
			}
			return
		}
		if p.String() != ptr {
			t.Fatalf("ParsePointer(%q).String() = %q", ptr, p.String())
		}
		v, err := decodeJSON([]byte(doc))
		if err != nil {
			return
		}
		got, err := p.Lookup(v)
		if err != nil && !errors.Is(err, ErrPointer) {
			t.Fatalf("Lookup(%q) in %q = %v, want ErrPointer", ptr, doc, err)
		}
		if err == nil && got == nil {
			t.Fatalf("Lookup(%q) in %q found nil without an error", ptr, doc)
		}
	})
}
