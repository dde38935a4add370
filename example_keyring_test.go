package idem_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Encrypting recorded results and intents at rest, and rotating the key:
// the old key stays in the keyring, for reading, until the records it
// sealed are gone.
func ExampleNewKeyring() {
	newKey := func(id string) idem.EncryptionKey {
		k := idem.EncryptionKey{ID: id, Secret: make([]byte, 32)}
		_, _ = rand.Read(k.Secret) // in production, load it from a secret store
		return k
	}
	ctx := context.Background()
	store := memstore.New()
	k1, k2 := newKey("2026-11"), newKey("2026-12")

	ring, _ := idem.NewKeyring(k1)
	e, _ := idem.New(store, idem.Config{Encryption: ring})
	req := idem.Request{Key: "order-1", Fingerprint: idem.NewFingerprint([]byte("charge 5000"))}
	_, _ = e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_1"), nil })
	e.Close()

	rec, _ := store.Get(ctx, "", "order-1")
	id, _ := idem.SealedKeyID(rec.Result)
	fmt.Println("stored sealed:", idem.Sealed(rec.Result), "under", id)

	// Rotate: k2 seals new records, k1 still reads the old ones.
	ring, _ = idem.NewKeyring(k2, k1)
	e, _ = idem.New(store, idem.Config{Encryption: ring})
	res, _ := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_2"), nil })
	fmt.Println("replayed:", string(res.Value))
	e.Close()

	// Without k1, the record is a clear error, never garbage or a re-run.
	ring, _ = idem.NewKeyring(k2)
	e, _ = idem.New(store, idem.Config{Encryption: ring})
	_, err := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_2"), nil })
	fmt.Println("unknown key:", errors.Is(err, idem.ErrUnknownKey))
	e.Close()
	// Output:
	// stored sealed: true under 2026-11
	// replayed: ch_1
	// unknown key: true
}
