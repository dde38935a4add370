package idem

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalFormEquals(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"order of fields", "amount=100&currency=usd", "currency=usd&amount=100", "amount=100&currency=usd"},
		{"percent-encoding variants", "a=x%20y&b=%41", "b=A&a=x+y", "a=x+y&b=A"},
		{"hex case", "a=%2a", "a=%2A", "a=%2A"},
		{"brackets escaped or not", "metadata%5Border%5D=1", "metadata[order]=1", "metadata%5Border%5D=1"},
		{"nested keys", "metadata[b]=2&metadata[a]=1", "metadata[a]=1&metadata[b]=2", "metadata%5Ba%5D=1&metadata%5Bb%5D=2"},
		{"indexed list items", "items[1][price]=q&items[0][price]=p&items[0][qty]=2",
			"items[0][qty]=2&items[0][price]=p&items[1][price]=q", "items%5B0%5D%5Bprice%5D=p&items%5B0%5D%5Bqty%5D=2&items%5B1%5D%5Bprice%5D=q"},
		{"empty parameters dropped", "a=1&&b=2&", "b=2&a=1", "a=1&b=2"},
		{"lists keep their order among other fields", "x=1&tags[]=a&tags[]=b", "tags[]=a&tags[]=b&x=1", "tags%5B%5D=a&tags%5B%5D=b&x=1"},
		{"a list's other fields move around it", "a=1&items[][p]=x&b=2", "b=2&a=1&items[][p]=x", "a=1&b=2&items%5B%5D%5Bp%5D=x"},
		{"raw UTF-8 and its escape", "name=%C3%A9", "name=é", "name=%C3%A9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := CanonicalForm([]byte(tc.a))
			if err != nil {
				t.Fatalf("CanonicalForm(%q): %v", tc.a, err)
			}
			cb, err := CanonicalForm([]byte(tc.b))
			if err != nil {
				t.Fatalf("CanonicalForm(%q): %v", tc.b, err)
			}
			if string(ca) != tc.want || string(cb) != tc.want {
				t.Errorf("CanonicalForm(%q) = %s, CanonicalForm(%q) = %s, want both %s", tc.a, ca, tc.b, cb, tc.want)
			}
			again, err := CanonicalForm(ca)
			if err != nil || string(again) != string(ca) {
				t.Errorf("not idempotent: %s -> %s, %v", ca, again, err)
			}
		})
	}
}

// TestCanonicalFormKeepsDifferences: bodies that some parser reads
// differently never share a canonical form.
func TestCanonicalFormKeepsDifferences(t *testing.T) {
	for _, tc := range []struct{ name, a, b string }{
		{"repeated name order", "a=1&a=2", "a=2&a=1"},
		{"repeated name count", "a=1&a=2", "a=2"},
		{"no '=' is not empty", "a", "a="},
		{"value", "amount=100", "amount=101"},
		{"'+' is a space, not a plus", "a=x+y", "a=x%2By"},
		{"list order", "tags[]=a&tags[]=b", "tags[]=b&tags[]=a"},
		// Rack groups a[][x]=1&a[][y]=2 into one item, a[][y]=2&a[][x]=1 too,
		// but PHP makes two items in input order.
		{"list item fields", "items[][price]=p&items[][qty]=1", "items[][qty]=1&items[][price]=p"},
		// PHP: a[]=1&a[0]=2 is [2]; a[0]=2&a[]=1 is [2,1].
		{"list and index", "a[]=1&a[0]=2", "a[0]=2&a[]=1"},
		// Rack: a[b]=1 then a[b][c]=2 fails; the reverse gives a[b]=1.
		{"value and nesting under it", "a[b]=1&a[b][c]=2", "a[b][c]=2&a[b]=1"},
		{"value and list under it", "a=1&a[][c]=2", "a[][c]=2&a=1"},
		// Rack reads "a]" and "[a]" as "a": malformed names keep their place.
		{"stray bracket", "a]=1&a=2", "a=2&a]=1"},
		{"leading bracket", "[a]=1&a=2", "a=2&[a]=1"},
		{"trailing text", "a[b]c=1&a=2", "a=2&a[b]c=1"},
		{"trailing text keeps its place", "a[b]c=1&x=2", "x=2&a[b]c=1"},
		{"unclosed bracket", "a[b=1&a[b]=2", "a[b]=2&a[b=1"},
		{"empty name", "=1&a=2", "a=2&=1"},
		{"leading zeros", "items[01]=a", "items[1]=a"},
		{"combining characters", "n=%C3%A9", "n=e%CC%81"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := CanonicalForm([]byte(tc.a))
			if err != nil {
				t.Fatalf("CanonicalForm(%q): %v", tc.a, err)
			}
			cb, err := CanonicalForm([]byte(tc.b))
			if err != nil {
				t.Fatalf("CanonicalForm(%q): %v", tc.b, err)
			}
			if string(ca) == string(cb) {
				t.Errorf("%q and %q share the canonical form %s", tc.a, tc.b, ca)
			}
		})
	}
}

func TestCanonicalFormErrors(t *testing.T) {
	deep := "a" + strings.Repeat("[b]", MaxFormDepth) + "=1"
	for _, tc := range []struct {
		name, in string
		offset   int
	}{
		{"semicolon separator", "a=1;b=2", 3},
		{"semicolon in a name", "x=1&a;b=2", 5},
		{"bad escape", "a=%zz", 2},
		{"short escape", "a=1&b=%4", 6},
		{"escape at the end", "a=%", 2},
		{"too deep", "x=1&" + deep, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := CanonicalForm([]byte(tc.in))
			var fe *FormError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidForm) {
				t.Fatalf("CanonicalForm(%q) = %q, %v; want a *FormError", tc.in, out, err)
			}
			if fe.Offset != tc.offset {
				t.Errorf("offset = %d, want %d (%v)", fe.Offset, tc.offset, err)
			}
			if strings.Contains(err.Error(), tc.in) {
				t.Errorf("error %q quotes the body", err)
			}
		})
	}
	// One segment fewer is accepted.
	ok := "a" + strings.Repeat("[b]", MaxFormDepth-1) + "=1"
	if _, err := CanonicalForm([]byte(ok)); err != nil {
		t.Errorf("a name of MaxFormDepth segments: %v", err)
	}
}

func TestFingerprintForm(t *testing.T) {
	h := BodyHasher{}
	fp := func(body string, kind BodyKind) (Fingerprint, Digests) {
		t.Helper()
		f, d, err := h.AppendBody(nil, "POST", "/v1/charges", []byte(body), kind)
		if err != nil {
			t.Fatal(err)
		}
		return f, Digests(d)
	}
	a, da := fp("amount=100&currency=usd&metadata[order]=1", BodyForm)
	b, db := fp("currency=usd&metadata%5Border%5D=1&amount=100", BodyForm)
	if a != b || da != db {
		t.Errorf("reordered form: %s %q vs %s %q", a, da, b, db)
	}
	// A body already in canonical form, hashed raw, is another request.
	canon, _ := fp("amount=100&currency=usd", BodyForm)
	if raw, _ := fp("amount=100&currency=usd", BodyRaw); raw == canon {
		t.Error("a form body and the same bytes hashed raw share a fingerprint")
	}
	c, dc := fp("amount=100&currency=usd&metadata[order]=2", BodyForm)
	if c == a {
		t.Error("a changed nested value kept the fingerprint")
	}
	if got := da.Diff(dc); len(got) != 1 || got[0] != "metadata" {
		t.Errorf("Diff = %q, want [metadata]", got)
	}
	if got := da.Len(); got != 3 {
		t.Errorf("digests %q: %d entries, want 3 (amount, currency, metadata)", da, got)
	}
	// No canonical form: hashed as bytes, no digests.
	bad, dbad := fp("a=%zz", BodyForm)
	if raw, _ := fp("a=%zz", BodyRaw); raw != bad || dbad != "" {
		t.Errorf("a form with no canonical form: %s %q; want the raw fingerprint %s and no digests", bad, dbad, raw)
	}
	// Append(isJSON=false) is still the raw hashing.
	f2, _, _ := h.Append(nil, "POST", "/v1/charges", []byte("a=1"), false)
	if raw, _ := fp("a=1", BodyRaw); f2 != raw {
		t.Error("Append(isJSON=false) changed")
	}
}

func TestFormDigestsBound(t *testing.T) {
	var b strings.Builder
	for i := range 10 {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString("f" + string(rune('a'+i)) + "=1")
	}
	_, d, _ := BodyHasher{MaxDigests: 3}.AppendBody(nil, "POST", "/", []byte(b.String()), BodyForm)
	if got := Digests(d).Len(); got != 4 {
		t.Errorf("digests %q: %d entries, want 3 and the rest", d, got)
	}
	_, d2, _ := BodyHasher{MaxDigests: 3}.AppendBody(nil, "POST", "/", []byte(strings.Replace(b.String(), "fj=1", "fj=2", 1)), BodyForm)
	if got := Digests(d).Diff(Digests(d2)); len(got) != 1 || got[0] != RestMembers {
		t.Errorf("Diff = %q, want the rest", got)
	}
}
