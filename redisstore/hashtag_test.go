package redisstore

import (
	"strings"
	"testing"
)

// clusterHashTag is the part of key Redis Cluster hashes to pick its slot:
// the text between the first '{' and the first '}' after it, when that is
// not empty; otherwise the whole key (the Cluster specification's rule).
func clusterHashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return key
	}
	return key[s+1 : s+1+e]
}

// TestHashTagIsTheWholeEscapedPair: for any scope and key — braces,
// separators, percent signs and bytes outside ASCII included — the hash
// tag Redis Cluster reads from a record's key is the whole braced section
// (escaped scope ':' escaped key), never cut short by a brace from the
// scope or key nor emptied; the record and its notification channel carry
// the same tag (one slot, as the scripts need); and two different pairs
// never share a tag. Redis's own slot function is not needed: the rule is
// applied here, so the test runs without a cluster.
func TestHashTagIsTheWholeEscapedPair(t *testing.T) {
	s := &Store{prefix: "idem"}
	pairs := [][2]string{
		{"}", "k"}, {"", "}k"}, {"{", "k"}, {"a}b", "c{"}, {"{}", "{}"}, {"%7D", "k"}, {"}", "%7D"},
		{"a:b", "c"}, {"a", "b:c"}, {"a%3Ab", "c"}, {"tenant", "k"}, {"", "k"}, {"ü", "k"}, {"t\x00", "k"},
	}
	seen := map[string][2]string{}
	for _, pr := range pairs {
		rec, ch := s.recChanKeys(pr[0], pr[1])
		section := strings.TrimSuffix(strings.TrimPrefix(rec, "idem:{"), "}:rec")
		tag := clusterHashTag(rec)
		if tag != section || tag == "" {
			t.Errorf("pair %q: key %q hashes on %q, want its whole braced section %q", pr, rec, tag, section)
		}
		if ct := clusterHashTag(ch); ct != tag {
			t.Errorf("pair %q: record %q and channel %q hash on %q and %q: two slots", pr, rec, ch, tag, ct)
		}
		if prev, ok := seen[tag]; ok {
			t.Errorf("pairs %q and %q share the tag %q", prev, pr, tag)
		}
		seen[tag] = pr
	}
}
