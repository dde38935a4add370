package main

import (
	"context"

	"github.com/idemkit/idem"
)

// keyFileUsage is the help of --encryption-key-file, on every command
// that takes it.
const keyFileUsage = "`FILE` of the keys recorded responses and intents are encrypted with at rest: one key per line, ID:BASE64 of 32 random bytes, the first is the current key (it encrypts), the others only decrypt (rotation); it must not be accessible to other users (chmod 600)"

// keyFile registers --encryption-key-file on f.
func (f *flags) keyFile() *string {
	return f.String("encryption-key-file", "", keyFileUsage)
}

// loadKeys reads the key file named by --encryption-key-file; "" is no
// encryption. A bad file is a usage error (exit 2).
func (f *flags) loadKeys(path string) (*idem.Keyring, int, bool) {
	if path == "" {
		return nil, 0, true
	}
	k, err := idem.LoadKeyring(path)
	if err != nil {
		return nil, f.usageError("--encryption-key-file: %v", err), false
	}
	return k, 0, true
}

// sealedID names the key id of r's sealed values.
func sealedID(r *idem.Record) string {
	if id, ok := idem.SealedKeyID(r.Result); ok {
		return id
	}
	return keyIDOf(r.Intent)
}

func keyIDOf(b []byte) string {
	id, _ := idem.SealedKeyID(b)
	return id
}

// openingStore is a store whose Get and List decrypt what they read with
// keys, for idem ui, which shows intents and recorded responses. Get fails
// on a record keys cannot open (the error names its key id); List keeps
// such a record with its sealed fields cleared, so one record under a lost
// key does not hide the others. Writes go through the engine (decide),
// which encrypts with the same keyring.
type openingStore struct {
	idem.Store
	keys *idem.Keyring
}

func (s openingStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	rec, err := s.Store.Get(ctx, scope, key)
	if err != nil {
		return nil, err
	}
	if err := s.keys.OpenRecord(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

func (s openingStore) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	recs, err := s.Store.List(ctx, f)
	for i := range recs {
		if s.keys.OpenRecord(&recs[i]) != nil {
			if idem.Sealed(recs[i].Result) {
				recs[i].Result = nil
			}
			if idem.Sealed(recs[i].Intent) {
				recs[i].Intent = nil
			}
		}
	}
	return recs, err
}
