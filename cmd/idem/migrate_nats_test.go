package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/testenv"
)

// TestMigrateNATS: migrate creates the bucket a nats:// DSN names (and
// finds it the second time), --print has no SQL to print, and doctor
// names a one-replica bucket as a refusal.
func TestMigrateNATS(t *testing.T) {
	u := strings.TrimSuffix(testenv.NATS.Need(t), "/")
	var b [4]byte
	_, _ = rand.Read(b[:])
	bucket := "idemtest-cli-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if nc, err := nats.Connect(u); err == nil {
			defer nc.Close()
			if js, err := jetstream.New(nc); err == nil {
				_ = js.DeleteKeyValue(context.Background(), bucket)
			}
		}
	})
	dsn := u + "/" + bucket + "?replicas=1"
	for range 2 {
		o, e, code := runCLI("migrate", "--store", dsn)
		if code != exitOK || o != "" || !strings.Contains(e, "bucket "+bucket+": 1 replicas, file storage") {
			t.Fatalf("migrate: code %d, stdout %q, stderr %q", code, o, e)
		}
	}
	if _, e, code := runCLI("migrate", "--print", "--store", dsn); code != exitUsage || !strings.Contains(e, "nothing to print") {
		t.Errorf("migrate --print: code %d, stderr %q", code, e)
	}
	o, e, _ := runCLI("doctor", "--store", u+"/"+bucket)
	if !strings.Contains(o, "REFUSE") || !strings.Contains(o, "replicas = 1") {
		t.Errorf("doctor does not name the one-replica bucket:\n%s\n%s", o, e)
	}
}
