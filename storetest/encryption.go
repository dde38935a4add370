package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

// Planted strings the encryption case records and then looks for in the
// store's raw values. A store test can grep its files for them too.
const (
	PlantedBody   = "planted-body-7f3a-secret-response"
	PlantedIntent = "planted-intent-c41e-counterparty"
)

// NewTestKey returns an EncryptionKey with a random secret.
func NewTestKey(t testing.TB, id string) idem.EncryptionKey {
	t.Helper()
	k := idem.EncryptionKey{ID: id, Secret: make([]byte, 32)}
	if _, err := rand.Read(k.Secret); err != nil {
		t.Fatal(err)
	}
	return k
}

func keyring(t *testing.T, cur idem.EncryptionKey, old ...idem.EncryptionKey) *idem.Keyring {
	t.Helper()
	k, err := idem.NewKeyring(cur, old...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// engineEncryption: with Config.Encryption, what the store holds of a
// result and an intent is sealed (no planted plaintext), replays and
// Resolve read through it, a rotated keyring reads records of the old key,
// and a record whose key is gone or whose bytes were altered or moved is
// a clear error — never garbage, never a re-run.
func engineEncryption(t *testing.T, x *ex) {
	a, b := NewTestKey(t, "key-a"), NewTestKey(t, "key-b")
	ea := x.engine(nil, idem.Config{Encryption: keyring(t, a)})
	r := req("k", "b")
	r.Intent = &idem.Intent{Operation: "charge", Amount: 100, Counterparty: PlantedIntent}
	if res, err := ea.DoBytes(x.ctx, r, x.effect(PlantedBody)); err != nil || string(res.Value) != PlantedBody {
		t.Fatalf("first = %+v, %v", res, err)
	}
	fail := req("f", "b")
	if _, err := ea.DoBytes(x.ctx, fail, func(context.Context, *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		return nil, errors.New(PlantedBody + " declined")
	}); !errors.Is(err, idem.ErrRecordedFailure) {
		t.Fatalf("failure = %v", err)
	}
	x.wantRuns(2)

	raw := func(key string) *idem.Record {
		t.Helper()
		rec, err := x.s.Get(x.ctx, "s", key)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for _, key := range []string{"k", "f"} {
		rec := raw(key)
		if !idem.Sealed(rec.Result) || bytes.Contains(rec.Result, []byte(PlantedBody)) {
			t.Fatalf("%s: stored result %q is not sealed", key, rec.Result)
		}
		if id, _ := idem.SealedKeyID(rec.Result); id != "key-a" {
			t.Fatalf("%s: sealed under key id %q, want key-a", key, id)
		}
	}
	if rec := raw("k"); !idem.Sealed(rec.Intent) || bytes.Contains(rec.Intent, []byte(PlantedIntent)) {
		t.Fatalf("stored intent %q is not sealed", rec.Intent)
	}

	// A fresh engine (no replay cache entries) reads through the store.
	check := func(e *idem.Engine) {
		t.Helper()
		res, err := e.DoBytes(x.ctx, req("k", "b"), x.effect("again"))
		if err != nil || !res.Replayed || string(res.Value) != PlantedBody {
			t.Fatalf("replay = %+v, %v; want %q", res, err, PlantedBody)
		}
		if in, err := idem.DecodeIntent(res.Record.Intent); err != nil || in == nil || in.Counterparty != PlantedIntent {
			t.Fatalf("replayed intent = %+v, %v", in, err)
		}
		var fe *idem.FailureError
		if _, err := e.DoBytes(x.ctx, fail, x.effect("again")); !errors.As(err, &fe) || fe.Message != PlantedBody+" declined" {
			t.Fatalf("failure replay = %v", err)
		}
	}
	check(x.engine(nil, idem.Config{Encryption: keyring(t, a)}))

	// Rotation: B seals new records, A still opens the old ones.
	eba := x.engine(nil, idem.Config{Encryption: keyring(t, b, a)})
	check(eba)
	if _, err := eba.DoBytes(x.ctx, req("k2", "b"), x.effect(PlantedBody)); err != nil {
		t.Fatal(err)
	}
	if id, _ := idem.SealedKeyID(raw("k2").Result); id != "key-b" {
		t.Fatalf("after rotation a new record is sealed under %q, want key-b", id)
	}
	x.wantRuns(3)

	// Key A gone, or no keyring at all: a clear error, and no re-run.
	for name, e := range map[string]*idem.Engine{
		"keyring without key-a": x.engine(nil, idem.Config{Encryption: keyring(t, b)}),
		"no keyring":            x.engine(nil, idem.Config{}),
	} {
		for _, key := range []string{"k", "f"} {
			_, err := e.DoBytes(x.ctx, req(key, "b"), x.effect("again"))
			var oe *idem.OpenError
			if !errors.Is(err, idem.ErrUnknownKey) || !errors.Is(err, idem.ErrRecordUnreadable) || !errors.As(err, &oe) || oe.KeyID != "key-a" {
				t.Fatalf("%s, %s: err = %v; want ErrUnknownKey naming key-a", name, key, err)
			}
		}
	}
	x.wantRuns(3)

	// Altered bytes, and a ciphertext moved onto another record: tampered.
	rec := raw("k")
	bad := bytes.Clone(rec.Result)
	bad[len(bad)-1] ^= 1
	if _, err := x.s.Resolve(x.ctx, idem.ResolveParams{Scope: "s", Key: "k", From: []idem.State{idem.StateSucceeded},
		To: idem.StateSucceeded, AttemptID: "tamper", Result: bad, Now: x.clock.Now(), ExpiresAt: rec.ExpiresAt}); err != nil {
		t.Fatal(err)
	}
	moved := raw("k2")
	if _, err := x.s.Resolve(x.ctx, idem.ResolveParams{Scope: "s", Key: "f", From: []idem.State{idem.StateFailed},
		To: idem.StateSucceeded, AttemptID: "move", Result: moved.Result, Now: x.clock.Now(), ExpiresAt: moved.ExpiresAt}); err != nil {
		t.Fatal(err)
	}
	e := x.engine(nil, idem.Config{Encryption: keyring(t, b, a)})
	for _, key := range []string{"k", "f"} {
		if _, err := e.DoBytes(x.ctx, req(key, "b"), x.effect("again")); !errors.Is(err, idem.ErrTampered) {
			t.Fatalf("%s: err = %v; want ErrTampered", key, err)
		}
	}
	x.wantRuns(3)

	// Engine.Resolve seals the result it records.
	if _, err := e.DoBytes(x.ctx, req("u", "b"), func(context.Context, *idem.Attempt) ([]byte, error) {
		x.runs.Add(1)
		return nil, idem.Unknown(errors.New("timeout"))
	}); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("unknown = %v", err)
	}
	got, err := e.Resolve(x.ctx, "s", "u", idem.Resolution{As: idem.StateSucceeded, Result: []byte(PlantedBody)})
	if err != nil || string(got.Result) != PlantedBody {
		t.Fatalf("Resolve = %+v, %v", got, err)
	}
	if stored := raw("u").Result; !idem.Sealed(stored) || bytes.Contains(stored, []byte(PlantedBody)) {
		t.Fatalf("resolved result stored as %q", stored)
	}
	if res, err := e.DoBytes(x.ctx, req("u", "b"), x.effect("again")); err != nil || string(res.Value) != PlantedBody {
		t.Fatalf("replay of resolved = %+v, %v", res, err)
	}
	x.wantRuns(4)
}
