package idem_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
)

const testSecret = "0123456789abcdef0123456789abcdef"

func mustDigestKey(t testing.TB, secret string) *idem.DigestKey {
	t.Helper()
	k, err := idem.NewDigestKey([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func bodyDigests(t testing.TB, body string) idem.Digests {
	t.Helper()
	_, d, err := idem.FingerprintBody("POST", "/c", []byte(body), true)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The stored form is pinned, computed here from its documented
// definition: records written by one release are compared by the next.
func TestDigestKeyStoredForm(t *testing.T) {
	k := mustDigestKey(t, testSecret)
	mac := func(msg string) []byte {
		h := hmac.New(sha256.New, []byte(testSecret))
		h.Write([]byte(msg))
		return h.Sum(nil)[:8]
	}
	const label = "idem/digests/hmac/v1\x00"
	if want := hex.EncodeToString(mac(label + "key id")); k.ID() != want {
		t.Fatalf("ID %q, want %q", k.ID(), want)
	}
	d := bodyDigests(t, `{"a b":1,"to":"DE00"}`)
	var want strings.Builder
	want.WriteString(k.ID() + ":")
	for i, pair := range strings.Split(string(d), "&") {
		name, _, _ := strings.Cut(pair, "=")
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len("alice")))
		if i > 0 {
			want.WriteByte('&')
		}
		want.WriteString(name + "=" + hex.EncodeToString(mac(label+string(n[:])+"alice"+pair)))
	}
	if got := k.Key("alice", d); got != want.String() {
		t.Fatalf("Key = %q, want %q", got, want.String())
	}
	if got := k.KeyBytes("alice", []byte(d)); got != want.String() {
		t.Fatalf("KeyBytes = %q, want %q", got, want.String())
	}
	if got := k.Key("alice", ""); got != k.ID()+":" {
		t.Fatalf("Key of no digests = %q, want the id and ':'", got)
	}
}

// The same digests keyed for several scopes have no digest in common, and
// none equals an unkeyed one. (The scope is length-prefixed, so "ab"+"c"
// and "a"+"bc" differ too.)
func TestDigestKeyDiffersAcrossScopes(t *testing.T) {
	k := mustDigestKey(t, testSecret)
	d := bodyDigests(t, `{"amount":5000,"currency":"EUR","to":"DE00","note":"x","same":"x"}`)
	seen := map[string]string{}
	plain, _ := url.ParseQuery(string(d))
	for name, v := range plain {
		seen[v[0]] = "unkeyed " + name
	}
	for _, scope := range []string{"alice", "carol", "bob", "alice ", "x"} {
		id, enc, ok := strings.Cut(k.Key(scope, d), ":")
		if !ok || id != k.ID() {
			t.Fatalf("scope %q: stored form %q", scope, k.Key(scope, d))
		}
		q, err := url.ParseQuery(enc)
		if err != nil || len(q) != len(plain) {
			t.Fatalf("scope %q: %d digests (%v), want %d", scope, len(q), err, len(plain))
		}
		for name, v := range q {
			if prev, ok := seen[v[0]]; ok {
				t.Errorf("scope %q: digest of %q equals the %s", scope, name, prev)
			}
			seen[v[0]] = "digest of " + name + " in scope " + scope
		}
	}
}

func TestDigestKeyDiff(t *testing.T) {
	k := mustDigestKey(t, testSecret)
	first := bodyDigests(t, `{"amount":5000,"to":"DE00","note":"x"}`)
	changed := bodyDigests(t, `{"amount":5000,"to":"DE01","extra":1}`)
	stored := k.Key("alice", first)
	if got, want := k.Diff(stored, "alice", changed), []string{"extra", "note", "to"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
	if got := k.Diff(stored, "alice", first); len(got) != 0 {
		t.Errorf("Diff of the same digests = %v, want none", got)
	}
	// Keyed for another scope, every member differs: a record is only
	// ever compared in its own scope, which the store's (scope, key)
	// uniqueness guarantees.
	if got := k.Diff(stored, "bob", first); len(got) != 3 {
		t.Errorf("Diff across scopes = %v, want all three members", got)
	}
	if got := k.Diff(k.Key("alice", ""), "alice", changed); !reflect.DeepEqual(got, []string{"amount", "extra", "to"}) {
		t.Errorf("Diff from no stored members = %v, want every member", got)
	}
	other := mustDigestKey(t, "another secret, another process!")
	for name, c := range map[string]struct {
		k      *idem.DigestKey
		stored string
		scope  string
	}{
		"another secret":  {other, stored, "alice"},
		"global scope":    {k, stored, ""},
		"unkeyed":         {k, string(first), "alice"},
		"no stored form":  {k, "", "alice"},
		"nil key":         {nil, stored, "alice"},
		"id alone, other": {k, other.ID() + ":", "alice"},
	} {
		if got := c.k.Diff(c.stored, c.scope, changed); got != nil {
			t.Errorf("%s: Diff = %v, want nil", name, got)
		}
	}
}

// In the global scope nothing is keyed: there is nothing to store.
func TestDigestKeyGlobalScope(t *testing.T) {
	k := mustDigestKey(t, testSecret)
	d := bodyDigests(t, `{"amount":5000}`)
	if got := k.Key("", d); got != "" {
		t.Errorf("Key in the global scope = %q, want \"\"", got)
	}
	if got := k.KeyBytes("", []byte(d)); got != "" {
		t.Errorf("KeyBytes in the global scope = %q, want \"\"", got)
	}
	var nilKey *idem.DigestKey
	if nilKey.Key("alice", d) != "" || nilKey.ID() != "" {
		t.Error("a nil DigestKey keys something")
	}
}

func TestNewDigestKey(t *testing.T) {
	if _, err := idem.NewDigestKey([]byte("short")); !errors.Is(err, idem.ErrDigestSecretTooShort) {
		t.Fatalf("short secret: %v, want ErrDigestSecretTooShort", err)
	}
	a, b := mustDigestKey(t, ""), mustDigestKey(t, "")
	if a.ID() == b.ID() || len(a.ID()) != 16 {
		t.Fatalf("random keys have ids %q and %q", a.ID(), b.ID())
	}
	secret := []byte(testSecret)
	k, err := idem.NewDigestKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	d := bodyDigests(t, `{"amount":5000}`)
	before := k.Key("alice", d)
	secret[0] ^= 1 // the key keeps its own copy
	if k.Key("alice", d) != before || mustDigestKey(t, testSecret).ID() != k.ID() {
		t.Fatal("a key made from one secret changed, or another made from it differs")
	}
}

// A DigestKey is used by every request at once.
func TestDigestKeyConcurrent(t *testing.T) {
	k := mustDigestKey(t, testSecret)
	d := bodyDigests(t, `{"amount":5000,"currency":"EUR","to":"DE00"}`)
	want := map[string]string{"alice": k.Key("alice", d), "bob": k.Key("bob", d)}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := []string{"alice", "bob"}[i%2]
			for range 200 {
				if got := k.KeyBytes(scope, []byte(d)); got != want[scope] {
					t.Errorf("%s: %q, want %q", scope, got, want[scope])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Keying reuses pooled HMACs and buffers: the stored string is the one
// allocation.
func TestDigestKeyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	k := mustDigestKey(t, testSecret)
	d := []byte(bodyDigests(t, `{"amount":5000,"currency":"EUR","to":"DE00"}`))
	if n := testing.AllocsPerRun(100, func() { _ = k.KeyBytes("alice", d) }); n > 1 {
		t.Errorf("KeyBytes: %v allocations, want 1", n)
	}
}
