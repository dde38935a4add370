package idemhttp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

func newKeyring(t *testing.T, ids ...string) (*idem.Keyring, []idem.EncryptionKey) {
	t.Helper()
	var keys []idem.EncryptionKey
	for _, id := range ids {
		k := idem.EncryptionKey{ID: id, Secret: make([]byte, 32)}
		_, _ = rand.Read(k.Secret)
		keys = append(keys, k)
	}
	ring, err := idem.NewKeyring(keys[0], keys[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return ring, keys
}

// TestEncryptedResponsesAtRest: with the engine's Encryption set, the
// recorded response and the intent (with the body's
// field digests) are sealed in the store; a replay serves the plaintext;
// a middleware whose keyring lacks the record's key answers 500
// record-unreadable naming the key id, and the handler does not run again.
func TestEncryptedResponsesAtRest(t *testing.T) {
	const secret = "acct-4111-planted-secret"
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	open := func(*testing.T) idem.Store { return st }
	ringA, keys := newKeyring(t, "a")
	h := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"account":"` + secret + `"}`))
	}
	e := newEnv(t, open, idem.Config{Encryption: ringA}, idemhttp.Config{Scope: tenantScope}, h)
	body := `{"to":"` + secret + `","amount":5}`
	wantStatus(t, e.do("POST", "/pay", "k1", body), http.StatusCreated)
	rec, err := st.Get(context.Background(), "tenant-1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if !idem.Sealed(rec.Result) || !idem.Sealed(rec.Intent) || bytes.Contains(rec.Result, []byte(secret)) || bytes.Contains(rec.Intent, []byte("to")) {
		t.Fatalf("stored record holds plaintext: result %q, intent %q", rec.Result, rec.Intent)
	}
	r := e.do("POST", "/pay", "k1", body)
	if r.status != http.StatusCreated || !strings.Contains(r.body, secret) || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("replay = %d %v %s", r.status, r.header, r.body)
	}
	// The mismatch path reads the (opened) intent's digests.
	p := wantProblem(t, e.do("POST", "/pay", "k1", `{"to":"`+secret+`","amount":6}`), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	if len(p.Fields) != 1 || p.Fields[0] != "amount" {
		t.Fatalf("mismatch fields = %v, want [amount]", p.Fields)
	}
	if n := e.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}

	// Rotated keyring [b, a]: still replays.
	ringBA, err := idem.NewKeyring(idem.EncryptionKey{ID: "b", Secret: bytes.Repeat([]byte{7}, 32)}, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, open, idem.Config{Encryption: ringBA, ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}, idemhttp.Config{Scope: tenantScope}, h)
	if r := e2.do("POST", "/pay", "k1", body); r.status != http.StatusCreated || !strings.Contains(r.body, secret) {
		t.Fatalf("replay after rotation = %d %s", r.status, r.body)
	}

	// Key a gone: 500 record-unreadable, never a re-run.
	ringB, _ := newKeyring(t, "b")
	e3 := newEnv(t, open, idem.Config{Encryption: ringB, ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}, idemhttp.Config{Scope: tenantScope}, h)
	for i := 0; i < 2; i++ {
		r := e3.do("POST", "/pay", "k1", body)
		p := wantProblem(t, r, http.StatusInternalServerError, idemhttp.TypeRecordUnreadable)
		if !strings.Contains(p.Detail, `"a"`) || strings.Contains(r.body, secret) {
			t.Fatalf("problem = %+v; want it to name key id a and hold no plaintext", p)
		}
	}
	if n := e.calls.Load() + e2.calls.Load() + e3.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times in all, want 1", n)
	}
}
