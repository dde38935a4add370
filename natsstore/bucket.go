package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketConfig is the bucket [CreateBucket] makes.
type BucketConfig struct {
	// Bucket is the bucket's name. Required.
	Bucket string
	// Replicas is how many servers hold each record: a write is
	// acknowledged once a majority of them has it. Defaults to 3, the
	// fewest that survive the loss of a server with every acknowledged
	// claim (see the package doc, "Durability").
	Replicas int
	// Memory keeps the bucket in memory instead of files: a restart of
	// its servers forgets every record. Defaults to false (file storage).
	Memory bool
	// APIPrefix is Config.APIPrefix. Defaults to "$JS.API.".
	APIPrefix string
}

// CreateBucket creates the bucket the store needs, as `idem migrate` does:
// file storage, cfg.Replicas replicas, one value kept per key (History 1),
// no bucket TTL (the sweeper removes expired records; see the package
// doc, "Retention"). A bucket that exists already is left as it is and
// returned without error when its settings are these; otherwise
// CreateBucket says which setting differs.
func CreateBucket(ctx context.Context, nc *nats.Conn, cfg BucketConfig) error {
	if nc == nil {
		return errors.New("natsstore: nil connection")
	}
	c := Config{Bucket: cfg.Bucket, APIPrefix: cfg.APIPrefix}
	if err := c.setDefaults(); err != nil {
		return err
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return fmt.Errorf("natsstore: BucketConfig.Replicas %d: JetStream takes 1 to 5", cfg.Replicas)
	}
	js, err := jetstream.NewWithAPIPrefix(nc, c.APIPrefix, jetstream.WithDefaultTimeout(c.CallTimeout))
	if err != nil {
		return fmt.Errorf("natsstore: %w", err)
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	want := jetstream.KeyValueConfig{Bucket: cfg.Bucket, History: 1, Storage: storage, Replicas: cfg.Replicas,
		Description: "idem records (natsstore)"}
	_, err = js.CreateKeyValue(ctx, want)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return checkExisting(ctx, js, want)
	}
	if err != nil {
		return fmt.Errorf("natsstore: create bucket %s: %w", cfg.Bucket, err)
	}
	return nil
}

// checkExisting compares an existing bucket's settings with want.
func checkExisting(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if err != nil {
		return fmt.Errorf("natsstore: bucket %s: %w", want.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("natsstore: bucket %s: %w", want.Bucket, err)
	}
	got := st.Config()
	switch {
	case got.Replicas != want.Replicas:
		return fmt.Errorf("natsstore: bucket %s exists with %d replicas, not %d (change it with nats stream edit KV_%s --replicas)", want.Bucket, got.Replicas, want.Replicas, want.Bucket)
	case got.Storage != want.Storage:
		return fmt.Errorf("natsstore: bucket %s exists with %s storage, not %s (storage cannot be changed: create another bucket)", want.Bucket, got.Storage, want.Storage)
	case got.TTL != 0:
		return fmt.Errorf("natsstore: bucket %s exists with a TTL of %s, which would delete records the sweeper must keep (remove it)", want.Bucket, got.TTL)
	}
	return nil
}
