package httpsyntax_test

import (
	"testing"

	"github.com/idemkit/idem/internal/httpsyntax"
)

func TestIsToken(t *testing.T) {
	for _, s := range []string{"GET", "X-Idempotency-Key", "vnd.api", "a!#$%&'*+-.^_`|~9"} {
		if !httpsyntax.IsToken(s) {
			t.Errorf("IsToken(%q) = false", s)
		}
	}
	for _, s := range []string{"", "a b", "a:b", "a\"b", "(x)", "a/b", "é", "a\x7f", "a\tb", "{}", "a;b", "a=b", "a,b", "a?b", "a@b", "[a]", "a\\b"} {
		if httpsyntax.IsToken(s) {
			t.Errorf("IsToken(%q) = true", s)
		}
	}
}

// IsToken accepts exactly RFC 9110's tchar: visible ASCII but the
// delimiters.
func TestIsTokenIsTchar(t *testing.T) {
	const delimiters = "\"(),/:;<=>?@[\\]{}"
	for c := 0; c < 256; c++ {
		want := c > ' ' && c < 0x7f
		for i := 0; i < len(delimiters); i++ {
			if byte(c) == delimiters[i] {
				want = false
			}
		}
		if got := httpsyntax.IsToken(string([]byte{byte(c)})); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", byte(c), got, want)
		}
	}
}
