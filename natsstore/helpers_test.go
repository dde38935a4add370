package natsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sharedURL is the shared NATS server (IDEM_TEST_NATS), for the
// single-server runs.
func sharedURL(t testing.TB) string {
	t.Helper()
	return testenv.NATS.Need(t)
}

// connect opens a connection to url, closed when the test ends. It
// retries reconnecting for as long as a test may keep a server down.
func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newBucket creates a bucket of its own for the test, with replicas
// replicas on file storage, deleted when the test ends.
func newBucket(t testing.TB, nc *nats.Conn, replicas int) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idemtest-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for range 50 { // a cluster that just started may not have placed streams yet
		if err = CreateBucket(ctx, nc, BucketConfig{Bucket: name, Replicas: replicas}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if js, err := jetstream.New(nc); err == nil && !nc.IsClosed() {
			_ = js.DeleteKeyValue(ctx, name)
		}
	})
	return name
}

// newStore opens a store on bucket over nc, closed when the test ends.
func newStore(t testing.TB, nc *nats.Conn, bucket string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, nc, Config{Bucket: bucket})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// t0 is a fixed test time, truncated to the microsecond as the engine does.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)

// mustClaim claims p on st and returns the record, failing t on an error.
func mustClaim(t testing.TB, st idem.Store, p idem.ClaimParams) idem.Record {
	t.Helper()
	res, err := st.Claim(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Record
}

func claimP(key, attempt string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{
		Scope: "tenant-a", Key: key, AttemptID: attempt,
		Fingerprint: idem.NewFingerprint([]byte(key)),
		Intent:      []byte(`{"op":"charge"}`),
		Now:         now, LeaseUntil: now.Add(30 * time.Second),
	}
}
