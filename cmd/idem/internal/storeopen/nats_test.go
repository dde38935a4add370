package storeopen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

func TestParseNATS(t *testing.T) {
	o, err := parseNATS(DSN{Scheme: "nats", Target: "u:p%40ss@a:4223,b/idem?replicas=5&storage=memory&call_timeout=2s"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.servers, ",") != "nats://a:4223,nats://b:4222" || o.user != "u" || o.password != "p@ss" ||
		o.bucket.Bucket != "idem" || o.bucket.Replicas != 5 || !o.bucket.Memory || o.callTimeout != 2*time.Second {
		t.Fatalf("parsed %+v", o)
	}
	if o, err = parseNATS(DSN{Scheme: "nats", Target: "h/b"}); err != nil || o.bucket.Replicas != 3 || o.bucket.Memory {
		t.Fatalf("defaults: %+v, %v (want 3 replicas, file storage)", o, err)
	}
	for target, want := range map[string]string{
		"h":                      "no bucket",
		"h/":                     "no bucket",
		"h/a.b":                  "bucket",
		"h/a/b":                  "bucket",
		"h/b?replicas=0":         "replicas",
		"h/b?replicas=6":         "replicas",
		"h/b?storage=disk":       "storage",
		"h/b?call_timeout=-1s":   "call_timeout",
		"h/b?prefix=x":           "unknown parameter",
		",h/b":                   "empty host",
		"h:99999/b":              "port",
		"h/b?replicas=3&%zz=1":   "query",
		"u:%zz@h/b":              "credentials",
		"h/b?call_timeout=never": "call_timeout",
	} {
		_, err := Parse("nats://" + target)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(nats://%s) = %v, want an error about %s", target, err, want)
		}
	}
}

// FuzzParseNATS: a nats:// DSN that parses names servers as host:port, a
// valid bucket, 1 to 5 replicas and a positive or default timeout; none
// makes the parser panic.
func FuzzParseNATS(f *testing.F) {
	for _, s := range []string{"h/b", "u:p@a:1,b:2/idem?replicas=3&storage=file&call_timeout=5s", "h", "h/b?replicas=x", "[::1]:4222/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		o, err := parseNATS(DSN{Scheme: "nats", Target: target})
		if err != nil {
			return
		}
		if !natsBucketRe.MatchString(o.bucket.Bucket) || o.bucket.Replicas < 1 || o.bucket.Replicas > 5 || o.callTimeout < 0 {
			t.Fatalf("parseNATS(%q) accepted %+v", target, o)
		}
		for _, s := range o.servers {
			if !strings.HasPrefix(s, "nats://") || strings.ContainsAny(s[7:], ",/?@") {
				t.Fatalf("parseNATS(%q): server %q", target, s)
			}
		}
	})
}

// TestOpenNATS: migrate creates the bucket the DSN describes, Open finds
// it, and the durability check the engine and idem doctor run names a
// one-replica bucket.
func TestOpenNATS(t *testing.T) {
	u := strings.TrimSuffix(testenv.NATS.Need(t), "/")
	bucket := "idemtest-" + randName(t)
	dsn := u + "/" + bucket + "?replicas=1"
	ctx := context.Background()
	if _, err := Open(ctx, dsn, Options{}); err == nil {
		t.Fatal("Open found a bucket before migrate created it")
	}
	desc, ok, err := Provision(ctx, dsn)
	if err != nil || !ok || !strings.Contains(desc, "1 replicas, file storage") {
		t.Fatalf("Provision = %q, %v, %v", desc, ok, err)
	}
	t.Cleanup(func() {
		nc, err := nats.Connect(u)
		if err != nil {
			return
		}
		defer nc.Close()
		if js, err := jetstream.New(nc); err == nil {
			_ = js.DeleteKeyValue(context.Background(), bucket)
		}
	})
	st, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := st.(idem.DurabilityChecker).CheckDurability(ctx)
	if err != nil || len(f) != 1 || f[0].Setting != "replicas" {
		t.Fatalf("CheckDurability = %v, %v; want the replicas finding", f, err)
	}
	if _, err := idem.New(st, idem.Config{}); !errors.Is(err, idem.ErrVolatileStore) {
		t.Fatalf("idem.New = %v, want ErrVolatileStore", err)
	}
	if _, _, err := Provision(ctx, u+"/"+bucket+"?replicas=1&storage=memory"); err == nil {
		t.Fatal("Provision accepted an existing bucket of other storage")
	}
}
