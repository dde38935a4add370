package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// idem ui reads records through openingStore: with the keyring, Get and
// List show what was recorded; without the record's key, Get is the
// keyring's error and List keeps the record with its sealed fields cleared.
func TestOpeningStoreDecryptsForTheDashboard(t *testing.T) {
	ctx := context.Background()
	key := func(id string, b byte) idem.EncryptionKey {
		return idem.EncryptionKey{ID: id, Secret: bytes.Repeat([]byte{b}, 32)}
	}
	ring, err := idem.NewKeyring(key("a", 1))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	e, err := idem.New(st, idem.Config{Encryption: ring})
	if err != nil {
		t.Fatal(err)
	}
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("x")),
		Intent: &idem.Intent{Operation: "charge", Fields: map[string]string{"to": "acct_secret"}}}
	if _, err := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_secret"), nil }); err != nil {
		t.Fatal(err)
	}
	_ = e.Close()

	raw, _ := st.Get(ctx, "", "k")
	if bytes.Contains(raw.Result, []byte("ch_secret")) || bytes.Contains(raw.Intent, []byte("acct_secret")) {
		t.Fatal("the store holds plaintext: the test cannot tell decryption from none")
	}
	rec, err := openingStore{Store: st, keys: ring}.Get(ctx, "", "k")
	if err != nil || string(rec.Result) != "ch_secret" || !bytes.Contains(rec.Intent, []byte("acct_secret")) {
		t.Fatalf("Get = %q / %q, %v; want the recorded result and intent", rec.Result, rec.Intent, err)
	}
	recs, err := openingStore{Store: st, keys: ring}.List(ctx, idem.ListFilter{})
	if err != nil || len(recs) != 1 || string(recs[0].Result) != "ch_secret" {
		t.Fatalf("List = %v, %v; want the one record, decrypted", recs, err)
	}

	other, _ := idem.NewKeyring(key("b", 2))
	if _, err := (openingStore{Store: st, keys: other}).Get(ctx, "", "k"); !errors.Is(err, idem.ErrUnknownKey) {
		t.Fatalf("Get without the record's key: %v, want ErrUnknownKey", err)
	}
	recs, err = openingStore{Store: st, keys: other}.List(ctx, idem.ListFilter{})
	if err != nil || len(recs) != 1 || recs[0].Result != nil || recs[0].Intent != nil {
		t.Fatalf("List without the record's key = %+v, %v; want the record with no result or intent", recs, err)
	}
}
