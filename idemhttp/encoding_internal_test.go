package idemhttp

import (
	"strings"
	"testing"
)

func TestAcceptsCoding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		accept string
		coding string
		want   bool
	}{
		{"", "gzip", false},
		{"gzip", "gzip", true},
		{"GZIP", "gzip", true},
		{"x-gzip", "gzip", true},
		{"gzip", "x-gzip", true},
		{"deflate, gzip;q=1.0", "gzip", true},
		{"gzip;q=0", "gzip", false},
		{"gzip; q=0.000", "gzip", false},
		{"gzip;q=0.001", "gzip", true},
		{"gzip;q=2", "gzip", false},
		{"gzip;q=abc", "gzip", false},
		{"*", "br", true},
		{"*;q=0", "br", false},
		{"*, br;q=0", "br", false},
		{"br;q=0, *", "br", false},
		{"identity", "gzip", false},
		{" , ,gzip", "gzip", true},
	} {
		if got := acceptsCoding([]string{c.accept}, c.coding); got != c.want {
			t.Errorf("acceptsCoding(%q, %s) = %v, want %v", c.accept, c.coding, got, c.want)
		}
	}
}

// FuzzAcceptsCoding: any Accept-Encoding value is answered without a
// panic, empty elements change nothing, and a coding refused by name
// stays refused whatever "*" says.
func FuzzAcceptsCoding(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0.5, br", "*;q=0", "x-gzip, identity;q=0", ";;;,=,q=", "gzip;q=1e400", "gzip;q=NaN"} {
		f.Add(s, "gzip")
	}
	f.Fuzz(func(t *testing.T, accept, coding string) {
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding == "" || coding == "*" || strings.ContainsAny(coding, ",;") {
			return
		}
		got := acceptsCoding([]string{accept}, coding)
		if acceptsCoding([]string{accept + ", ,"}, coding) != got {
			t.Fatalf("empty elements changed the answer for %q", accept)
		}
		if acceptsCoding([]string{accept, coding + ";q=0", "*"}, coding) && !acceptsCoding([]string{accept}, coding) {
			t.Fatalf("%q;q=0 and * accept %q", coding, coding)
		}
	})
}
