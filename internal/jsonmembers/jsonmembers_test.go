package jsonmembers

import (
	"testing"

	"github.com/idemkit/idem"
)

func canon(t *testing.T, s string) string {
	t.Helper()
	c, err := idem.CanonicalJSON([]byte(s))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return string(c)
}

func TestReorderedIsTheSameDocument(t *testing.T) {
	for _, body := range []string{`{"a":1,"b":[1,2],"c":{"x":"y"}}`, `{}`, `{"<":"&"}`, ` {"a" : 1.0} `} {
		r, ok := Reordered(body)
		if !ok {
			t.Fatalf("%q: not reordered", body)
		}
		if r == body {
			t.Errorf("%q: reordered body has the same bytes", body)
		}
		if canon(t, r) != canon(t, body) {
			t.Errorf("%q → %q: another document", body, r)
		}
	}
}

func TestChangedIsAnotherDocument(t *testing.T) {
	for _, body := range []string{`{"a":1}`, `{}`} {
		if c := Changed(body); canon(t, c) == canon(t, body) {
			t.Errorf("%q → %q: the same document", body, c)
		}
	}
	if c := Changed("raw"); c == "raw" {
		t.Error("a raw body was not changed")
	}
}

func TestNotAnObject(t *testing.T) {
	for _, body := range []string{``, `[1]`, `{"a":1} {"b":2}`, `{"a":}`, `raw`, `{"a":1`} {
		if _, ok := Reordered(body); ok {
			t.Errorf("%q: reordered as an object", body)
		}
	}
}
