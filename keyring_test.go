package idem_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func testKey(t *testing.T, id string) idem.EncryptionKey {
	t.Helper()
	k := idem.EncryptionKey{ID: id, Secret: make([]byte, 32)}
	if _, err := rand.Read(k.Secret); err != nil {
		t.Fatal(err)
	}
	return k
}

func mustKeyring(t *testing.T, cur idem.EncryptionKey, old ...idem.EncryptionKey) *idem.Keyring {
	t.Helper()
	k, err := idem.NewKeyring(cur, old...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyringSealOpen(t *testing.T) {
	a, b := testKey(t, "a"), testKey(t, "b")
	ka := mustKeyring(t, a)
	plain := []byte("response body 4242")
	s1, err := ka.SealResult("tenant", "k1", plain)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := ka.SealResult("tenant", "k1", plain)
	if !idem.Sealed(s1) || bytes.Contains(s1, plain) || bytes.Equal(s1, s2) {
		t.Fatalf("sealed = %q (and %q): want an envelope, no plaintext, a fresh nonce each time", s1, s2)
	}
	if id, ok := idem.SealedKeyID(s1); !ok || id != "a" {
		t.Fatalf("key id = %q, %v", id, ok)
	}
	// Rotation: [b current, a old] opens a's values and seals with b.
	kba := mustKeyring(t, b, a)
	if got, err := kba.OpenResult("tenant", "k1", s1); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("rotated open = %q, %v", got, err)
	}
	if s, _ := kba.SealResult("tenant", "k1", plain); must(idem.SealedKeyID(s)) != "b" {
		t.Fatalf("rotated keyring seals under %q", must(idem.SealedKeyID(s)))
	}
	// Unknown key: a keyring without a, and no keyring.
	for _, k := range []*idem.Keyring{mustKeyring(t, b), nil} {
		_, err := k.OpenResult("tenant", "k1", s1)
		var oe *idem.OpenError
		if !errors.Is(err, idem.ErrUnknownKey) || !errors.Is(err, idem.ErrRecordUnreadable) || !errors.As(err, &oe) || oe.KeyID != "a" {
			t.Fatalf("open with %v = %v; want ErrUnknownKey for key a", k.IDs(), err)
		}
		if !strings.Contains(err.Error(), `"a"`) {
			t.Fatalf("error %q does not name the key id", err)
		}
	}
	// Tampered, truncated, moved to another record or field.
	flip := bytes.Clone(s1)
	flip[len(flip)-3] ^= 0x40
	for name, tc := range map[string]struct {
		b          []byte
		key, field string
	}{
		"flipped":       {flip, "k1", "result"},
		"truncated":     {s1[:len(s1)-20], "k1", "result"},
		"header only":   {s1[:9], "k1", "result"},
		"other record":  {s1, "k2", "result"},
		"other field":   {s1, "k1", "intent"},
		"other version": {append(append([]byte(nil), s1[:6]...), append([]byte{2}, s1[7:]...)...), "k1", "result"},
	} {
		var err error
		if tc.field == "intent" {
			_, err = ka.OpenIntent("tenant", tc.key, tc.b)
		} else {
			_, err = ka.OpenResult("tenant", tc.key, tc.b)
		}
		if !errors.Is(err, idem.ErrTampered) || !errors.Is(err, idem.ErrRecordUnreadable) {
			t.Errorf("%s: open = %v; want ErrTampered", name, err)
		}
	}
	// Plaintext (written before encryption) opens as itself; empty stays empty.
	if got, err := ka.OpenResult("tenant", "k1", plain); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("plaintext open = %q, %v", got, err)
	}
	if s, _ := ka.SealResult("tenant", "k1", nil); s != nil {
		t.Fatalf("empty value sealed as %q", s)
	}
}

func must(s string, _ bool) string { return s }

func TestNewKeyringRefusesBadKeys(t *testing.T) {
	good := testKey(t, "good")
	for name, tc := range map[string]struct{ cur, old idem.EncryptionKey }{
		"short secret":  {idem.EncryptionKey{ID: "x", Secret: make([]byte, 16)}, good},
		"empty id":      {idem.EncryptionKey{ID: "", Secret: make([]byte, 32)}, good},
		"id with colon": {idem.EncryptionKey{ID: "a:b", Secret: make([]byte, 32)}, good},
		"long id":       {idem.EncryptionKey{ID: strings.Repeat("a", 65), Secret: make([]byte, 32)}, good},
		"duplicate id":  {good, good},
	} {
		if _, err := idem.NewKeyring(tc.cur, tc.old); !errors.Is(err, idem.ErrBadKeyring) {
			t.Errorf("%s: NewKeyring = %v; want ErrBadKeyring", name, err)
		}
	}
}

func TestParseKeyring(t *testing.T) {
	b64 := func() string {
		s := make([]byte, 32)
		_, _ = rand.Read(s)
		return base64.StdEncoding.EncodeToString(s)
	}
	k, err := idem.ParseKeyring([]byte("# keys\n\nk2:" + b64() + "\n k1 : " + b64() + " \n"))
	if err != nil || k.CurrentID() != "k2" || strings.Join(k.IDs(), ",") != "k2,k1" {
		t.Fatalf("ParseKeyring = %v, %v", k.IDs(), err)
	}
	for name, data := range map[string]string{
		"empty":      "# nothing\n",
		"no colon":   "k1 " + b64(),
		"not base64": "k1:!!!",
		"16 bytes":   "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"duplicate":  "k1:" + b64() + "\nk1:" + b64(),
	} {
		if _, err := idem.ParseKeyring([]byte(data)); !errors.Is(err, idem.ErrBadKeyring) {
			t.Errorf("%s: ParseKeyring = %v; want ErrBadKeyring", name, err)
		}
	}
}

// TestSpoolHoldsCiphertext: an outcome the store could not take goes to
// the spool sealed (the file holds no plaintext), is replayed from the
// spool as plaintext, and is applied to the store with the same sealed
// bytes.
func TestSpoolHoldsCiphertext(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sp := openSpool(t, dir)
	st := &downStore{Store: memstore.New()}
	cfg := spoolConfig(sp)
	cfg.Encryption = mustKeyring(t, testKey(t, "a"))
	e := newEngine(t, st, cfg)
	st.down.Store(true)
	const body = "spooled-secret-9d1c"
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 5000")),
		Intent: &idem.Intent{Counterparty: "spooled-intent-77"}}
	r, err := e.DoBytes(ctx, req, ok(body))
	if err != nil || string(r.Value) != body || string(r.Record.Result) != body {
		t.Fatalf("DoBytes = %+v, %v; want the outcome, spooled", r, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.outcome.json"))
	if len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(body)) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString([]byte(body))[:12])) {
		t.Fatalf("spool file holds the plaintext: %s", raw)
	}
	pending := sp.Pending()
	if len(pending) != 1 || !idem.Sealed(pending[0].Result) {
		t.Fatalf("spooled outcome = %+v; want a sealed result", pending)
	}
	ran := false
	r, err = e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if err != nil || !r.Replayed || string(r.Value) != body || ran {
		t.Fatalf("duplicate while spooled = %+v, %v (ran %v)", r, err, ran)
	}
	st.down.Store(false)
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v", n, err)
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || !bytes.Equal(rec.Result, pending[0].Result) {
		t.Fatalf("applied record = %+v, %v; want the spooled sealed bytes", rec, err)
	}
}

// TestEncryptedRetriesWriteTheSameBytes: an outcome write whose answer
// was lost is retried with the bytes sealed once, so the store recognises
// its own write (a second sealing would differ and be refused as fenced).
func TestEncryptedRetriesWriteTheSameBytes(t *testing.T) {
	ctx := context.Background()
	st := &lostAnswerStore{Store: memstore.New()}
	st.lose.Store(1)
	e := newEngine(t, st, idem.Config{Encryption: mustKeyring(t, testKey(t, "a"))})
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("b"))}
	r, err := e.DoBytes(ctx, req, ok("v"))
	if err != nil || string(r.Value) != "v" {
		t.Fatalf("DoBytes = %+v, %v; want v recorded despite the lost answer", r, err)
	}
	if st.writes.Load() < 2 {
		t.Fatalf("finish written %d times; the lost answer was not retried", st.writes.Load())
	}
}

// lostAnswerStore commits an outcome write and then loses its answer,
// lose times.
type lostAnswerStore struct {
	*memstore.Store
	lose   atomic.Int64
	writes atomic.Int64
}

func (s *lostAnswerStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	s.writes.Add(1)
	r, err := s.Store.Finish(ctx, p)
	if err == nil && s.lose.Add(-1) >= 0 {
		return nil, errStoreDown
	}
	return r, err
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	line := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)) + "\n"
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(line), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := idem.LoadKeyring(write("ok", 0o600)); err != nil || k.CurrentID() != "k1" {
		t.Fatalf("LoadKeyring(0600) = %v, %v", k, err)
	}
	if _, err := idem.LoadKeyring(write("group", 0o640)); err != nil {
		t.Fatalf("LoadKeyring(0640) = %v", err)
	}
	if _, err := idem.LoadKeyring(write("world", 0o644)); !errors.Is(err, idem.ErrBadKeyring) || !strings.Contains(err.Error(), "other users") {
		t.Fatalf("LoadKeyring(0644) = %v; want a refusal naming the mode", err)
	}
	if _, err := idem.LoadKeyring(filepath.Join(dir, "missing")); !errors.Is(err, idem.ErrBadKeyring) {
		t.Fatalf("LoadKeyring(missing) = %v", err)
	}
}

func BenchmarkKeyringSealOpen(b *testing.B) {
	k, err := idem.NewKeyring(idem.EncryptionKey{ID: "2026-12", Secret: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		b.Fatal(err)
	}
	val := bytes.Repeat([]byte("x"), 512)
	b.ReportAllocs()
	for b.Loop() {
		s, _ := k.SealResult("scope", "order-1", val)
		if _, err := k.OpenResult("scope", "order-1", s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKeyringConcurrentUse: one keyring seals and opens from many
// goroutines at once (run with -race).
func TestKeyringConcurrentUse(t *testing.T) {
	k := mustKeyring(t, testKey(t, "a"), testKey(t, "b"))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := []byte("value " + strconv.Itoa(g) + "/" + strconv.Itoa(i))
				s, err := k.SealResult("s", "k", v)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := k.OpenResult("s", "k", s); err != nil || !bytes.Equal(got, v) {
					t.Errorf("open = %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestWaiterGetsUnreadableOutcomeAtOnce: a duplicate waiting for an
// attempt of another engine, whose outcome is sealed with a key the
// waiter's keyring lacks, gets ErrUnknownKey when the outcome lands, not
// a wait until its bound and no run of its own.
func TestWaiterGetsUnreadableOutcomeAtOnce(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	ea := newEngine(t, st, idem.Config{Encryption: mustKeyring(t, testKey(t, "a"))})
	// B's store says when B's waiter subscribed to the key.
	subscribed := make(chan struct{}, 1)
	eb := newEngine(t, &subscribeStore{Store: st, subscribed: subscribed},
		idem.Config{Encryption: mustKeyring(t, testKey(t, "b")), InFlight: idem.InFlightWait, Wait: 5 * time.Second})
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("b"))}
	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = ea.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-finish
			return []byte("v"), nil
		})
	}()
	<-started
	errc := make(chan error, 1)
	go func() {
		_, err := eb.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			t.Error("the waiter ran the effect")
			return nil, nil
		})
		errc <- err
	}()
	<-subscribed // B waits
	close(finish)
	if err := <-errc; !errors.Is(err, idem.ErrUnknownKey) {
		t.Fatalf("waiter = %v; want ErrUnknownKey", err)
	}
}

type subscribeStore struct {
	*memstore.Store
	subscribed chan struct{}
}

func (s *subscribeStore) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	ch, cancel, err := s.Store.Subscribe(ctx, scope, key)
	select {
	case s.subscribed <- struct{}{}:
	default:
	}
	return ch, cancel, err
}

// hintCheckStore records, for every outcome write, whether it carried the
// caller's claim and whether that claim's intent was the store's bytes.
type hintCheckStore struct {
	idem.Store
	mu                 sync.Mutex
	finishes, matching int
}

func (h *hintCheckStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if p.Claim.AttemptID == p.AttemptID && p.Claim.Key == p.Key {
		if cur, err := h.Store.Get(ctx, p.Scope, p.Key); err == nil && bytes.Equal(cur.Intent, p.Claim.Intent) && idem.Sealed(cur.Intent) {
			h.mu.Lock()
			h.matching++
			h.mu.Unlock()
		}
	}
	h.mu.Lock()
	h.finishes++
	h.mu.Unlock()
	return h.Store.Finish(ctx, p)
}

// TestEncryptedFinishKeepsTheClaimHint: with encryption on, the outcome
// write still hands the store the claim as the store holds it — its
// sealed intent, not the opened one — so a SQL store can finish with one
// statement and no read-back; the handler still sees the plaintext.
func TestEncryptedFinishKeepsTheClaimHint(t *testing.T) {
	st := &hintCheckStore{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{Encryption: mustKeyring(t, testKey(t, "a"))})
	in := &idem.Intent{Operation: "charge", Amount: 500, Currency: "EUR"}
	for i := range 3 {
		r, err := e.DoBytes(context.Background(), idem.Request{Scope: "s", Key: idem.Key("k" + strconv.Itoa(i)), Intent: in},
			func(_ context.Context, a *idem.Attempt) ([]byte, error) {
				if a.Intent == nil || a.Intent.Operation != "charge" {
					t.Errorf("handler saw intent %+v", a.Intent)
				}
				return []byte("ok"), nil
			})
		if err != nil || string(r.Value) != "ok" {
			t.Fatalf("DoBytes: %v, %v", r, err)
		}
	}
	if st.finishes != 3 || st.matching != 3 {
		t.Fatalf("%d of %d outcome writes carried the stored claim; want all 3", st.matching, st.finishes)
	}
}
