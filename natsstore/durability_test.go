package natsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
)

func TestDurabilityFindings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  jetstream.StreamConfig
		want []string // settings refused
	}{
		{"R3 file", jetstream.StreamConfig{Replicas: 3, Storage: jetstream.FileStorage}, nil},
		{"R5 file", jetstream.StreamConfig{Replicas: 5, Storage: jetstream.FileStorage}, nil},
		{"R1 file", jetstream.StreamConfig{Replicas: 1, Storage: jetstream.FileStorage}, []string{"replicas"}},
		{"R2 file", jetstream.StreamConfig{Replicas: 2, Storage: jetstream.FileStorage}, []string{"replicas"}},
		{"R3 memory", jetstream.StreamConfig{Replicas: 3, Storage: jetstream.MemoryStorage}, []string{"storage"}},
		{"R3 TTL", jetstream.StreamConfig{Replicas: 3, MaxAge: time.Hour}, []string{"max_age (bucket TTL)"}},
		{"R1 memory", jetstream.StreamConfig{Replicas: 1, Storage: jetstream.MemoryStorage}, []string{"replicas", "storage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := durabilityFindings("b", &tc.cfg)
			if len(got) != len(tc.want) {
				t.Fatalf("findings %v, want settings %v", got, tc.want)
			}
			for i, f := range got {
				if f.Setting != tc.want[i] || f.Severity != idem.SeverityRefuse {
					t.Errorf("finding %d = %v (%v), want %s refused", i, f, f.Severity, tc.want[i])
				}
			}
		})
	}
}

func TestVersionFinding(t *testing.T) {
	for _, tc := range []struct {
		version  string
		replicas int
		want     idem.Severity // 0: no finding
	}{
		{"2.9.10", 3, idem.SeverityRefuse}, // Debian's: nats-server issue #4320
		{"2.10.18", 3, idem.SeverityRefuse},
		{"2.10.19", 3, 0},
		{"2.11.17", 3, 0},
		{"v2.12.0-beta.1", 3, 0},
		{"3.0.0", 5, 0},
		{"2.9.10", 1, 0}, // one replica: no replicated update to race
		{"garbage", 3, idem.SeverityWarning},
	} {
		f := versionFinding(tc.version, tc.replicas)
		var got idem.Severity
		if f != nil {
			got = f.Severity
		}
		if got != tc.want {
			t.Errorf("versionFinding(%q, R%d) = %v, want severity %v", tc.version, tc.replicas, f, tc.want)
		}
	}
}

// TestDurabilityRefused: the engine refuses a one-replica bucket and a
// memory bucket of the shared server unless told to run on a store that
// can forget, and idem doctor's check names the settings.
func TestDurabilityRefused(t *testing.T) {
	nc := connect(t, sharedURL(t))
	ctx := context.Background()
	mem := newBucket(t, nc, 1)
	// A second bucket in memory.
	memName := mem + "-mem"
	if err := CreateBucket(ctx, nc, BucketConfig{Bucket: memName, Replicas: 1, Memory: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if js, err := jetstream.New(nc); err == nil {
			_ = js.DeleteKeyValue(context.Background(), memName)
		}
	})
	for name, want := range map[string][]string{mem: {"replicas"}, memName: {"replicas", "storage"}} {
		s := newStore(t, nc, name)
		f, err := s.CheckDurability(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) != len(want) {
			t.Fatalf("%s: findings %v, want %v", name, f, want)
		}
		for i := range f {
			if f[i].Setting != want[i] {
				t.Errorf("%s: finding %d is %s, want %s", name, i, f[i].Setting, want[i])
			}
		}
		_, err = idem.New(s, idem.Config{})
		if !errors.Is(err, idem.ErrVolatileStore) {
			t.Fatalf("%s: idem.New = %v, want ErrVolatileStore", name, err)
		}
		e, err := idem.New(s, idem.Config{AllowVolatileStore: true})
		if err != nil {
			t.Fatalf("%s: idem.New with AllowVolatileStore: %v", name, err)
		}
		e.Close()
	}
}

// TestCreateBucketExisting: CreateBucket leaves a bucket with its
// settings alone and names the setting of one that differs.
func TestCreateBucketExisting(t *testing.T) {
	nc := connect(t, sharedURL(t))
	name := newBucket(t, nc, 1)
	ctx := context.Background()
	if err := CreateBucket(ctx, nc, BucketConfig{Bucket: name, Replicas: 1}); err != nil {
		t.Fatalf("same settings: %v", err)
	}
	if err := CreateBucket(ctx, nc, BucketConfig{Bucket: name, Replicas: 1, Memory: true}); err == nil {
		t.Fatal("other storage accepted")
	}
	if _, err := New(ctx, nc, Config{Bucket: name + "-absent"}); !errors.Is(err, ErrBucketNotFound) {
		t.Fatalf("New on an absent bucket = %v, want ErrBucketNotFound", err)
	}
	if _, err := New(ctx, nc, Config{Bucket: "bad.name"}); err == nil {
		t.Fatal("New took a bucket name with a dot")
	}
}
