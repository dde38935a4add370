package idem

import (
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzCanonicalForm checks the form canonicaliser against a reference
// written apart from it (net/url's decoding, a regular expression for the
// names, pairwise dependence): the canonical form holds the same
// parameters, keeps the order of every two a parser could tell apart
// (sound: no two requests that differ share a fingerprint), is reached
// from any other encoding and any other order that keeps those (complete:
// a re-encoded retry matches), is canonical already, and means the same to
// url.ParseQuery.
func FuzzCanonicalForm(f *testing.F) {
	for _, s := range []string{
		"amount=100&currency=usd", "metadata[order]=1&metadata%5Bnote%5D=x+y",
		"items[0][price]=p&items[1][price]=q", "items[][price]=p&items[][qty]=1&items[][price]=q",
		"a=1&a=2&a", "a]=1&[a]=2&a[b]c=3&a=4", "a=%zz", "a=1;b=2", "&&=&",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalForm(in)
		ref, refErr := refParseForm(string(in))
		if err != nil {
			if refErr == nil && !tooDeep(ref) {
				t.Fatalf("refused %q (%v), which the reference reads", in, err)
			}
			return
		}
		if refErr != nil {
			t.Fatalf("accepted %q, which the reference refuses (%v): %q", in, refErr, out)
		}
		got, err := refParseForm(string(out))
		if err != nil {
			t.Fatalf("output %q of %q does not parse: %v", out, in, err)
		}
		checkLinearisation(t, in, ref, got)
		again, err := CanonicalForm(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if len(ref) > 200 {
			return // the reorderings below are quadratic
		}
		h := fnv.New64a()
		_, _ = h.Write(in)
		rng := rand.New(rand.NewPCG(h.Sum64(), 1))
		for range 3 {
			alt := reencode(rng, shuffleKeeping(rng, ref))
			c, err := CanonicalForm([]byte(alt))
			if err != nil || string(c) != string(out) {
				t.Fatalf("%q and its reordering %q: %q vs %q (%v)", in, alt, out, c, err)
			}
		}
		if q, err := url.ParseQuery(string(in)); err == nil {
			q2, err := url.ParseQuery(string(out))
			if err != nil || !sameQuery(q, q2) {
				t.Fatalf("url.ParseQuery reads %q and its canonical form %q differently: %v vs %v (%v)", in, out, q, q2, err)
			}
		}
	})
}

type refParam struct {
	name, value string
	hasEq       bool
}

// refParseForm reads a form body as CanonicalForm's rules say, with
// net/url's decoding.
func refParseForm(body string) ([]refParam, error) {
	var ps []refParam
	for _, part := range strings.Split(body, "&") {
		if part == "" {
			continue
		}
		if strings.Contains(part, ";") {
			return nil, errorString("semicolon")
		}
		name, value, hasEq := strings.Cut(part, "=")
		n, err := url.QueryUnescape(name)
		if err != nil {
			return nil, err
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			return nil, err
		}
		ps = append(ps, refParam{n, v, hasEq})
	}
	return ps, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

var refPathRE = regexp.MustCompile(`^([^\[\]]+)((?:\[[^\[\]]*\])*)$`)

// refPath is a name's path up to its first empty segment, and whether the
// name is a plain path at all; n counts every segment.
func refPath(name string) (path []string, plain bool, n int) {
	m := refPathRE.FindStringSubmatch(name)
	if m == nil {
		return nil, false, 0
	}
	path = []string{m[1]}
	n = 1
	list := false
	for _, s := range strings.Split(m[2], "]") {
		if s == "" {
			continue
		}
		n++
		seg := strings.TrimPrefix(s, "[")
		if seg == "" {
			list = true
		}
		if !list {
			path = append(path, seg)
		}
	}
	return path, true, n
}

func tooDeep(ps []refParam) bool {
	for _, p := range ps {
		if _, _, n := refPath(p.name); n > MaxFormDepth {
			return true
		}
	}
	return false
}

// dependent reports whether some parser could read a and b differently in
// the other order.
func dependent(a, b refParam) bool {
	pa, oka, _ := refPath(a.name)
	pb, okb, _ := refPath(b.name)
	if !oka || !okb {
		return true
	}
	if len(pa) > len(pb) {
		pa, pb = pb, pa
	}
	return slices.Equal(pa, pb[:len(pa)])
}

// checkLinearisation fails unless got is a reordering of ref that keeps
// the order of every two dependent parameters.
func checkLinearisation(t *testing.T, in []byte, ref, got []refParam) {
	t.Helper()
	if len(ref) != len(got) {
		t.Fatalf("%q: %d parameters, its canonical form %d", in, len(ref), len(got))
	}
	// pos[i] is where ref[i] went; equal parameters are dependent, so they
	// keep their order and the first unused match is the right one.
	pos := make([]int, len(ref))
	used := make([]bool, len(got))
	for i, p := range ref {
		pos[i] = -1
		for j, q := range got {
			if !used[j] && p == q {
				pos[i], used[j] = j, true
				break
			}
		}
		if pos[i] < 0 {
			t.Fatalf("%q: parameter %+v missing from the canonical form %+v", in, p, got)
		}
	}
	for i := range ref {
		for j := i + 1; j < len(ref); j++ {
			if dependent(ref[i], ref[j]) && pos[i] > pos[j] {
				t.Fatalf("%q: %+v and %+v swapped in the canonical form", in, ref[i], ref[j])
			}
		}
	}
}

// shuffleKeeping returns a random order of ps that keeps the order of
// every two dependent parameters.
func shuffleKeeping(rng *rand.Rand, ps []refParam) []refParam {
	done := make([]bool, len(ps))
	out := make([]refParam, 0, len(ps))
	for len(out) < len(ps) {
		var ready []int
		for i := range ps {
			if done[i] {
				continue
			}
			ok := true
			for j := 0; j < i && ok; j++ {
				ok = done[j] || !dependent(ps[j], ps[i])
			}
			if ok {
				ready = append(ready, i)
			}
		}
		i := ready[rng.IntN(len(ready))]
		done[i] = true
		out = append(out, ps[i])
	}
	return out
}

// reencode writes ps as a form body, each byte spelled one of the ways a
// client may, with empty parameters here and there.
func reencode(rng *rand.Rand, ps []refParam) string {
	var b strings.Builder
	enc := func(s string) {
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == ' ' && rng.IntN(2) == 0:
				b.WriteByte('+')
			case !strings.ContainsRune("&=%+;", rune(c)) && c > ' ' && rng.IntN(3) > 0:
				b.WriteByte(c)
			default:
				hex := "0123456789ABCDEF"
				if rng.IntN(2) == 0 {
					hex = "0123456789abcdef"
				}
				b.Write([]byte{'%', hex[c>>4], hex[c&15]})
			}
		}
	}
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		if rng.IntN(4) == 0 {
			b.WriteByte('&')
		}
		enc(p.name)
		if p.hasEq {
			b.WriteByte('=')
			enc(p.value)
		}
	}
	return b.String()
}

func sameQuery(a, b url.Values) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
