package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/natsstore"
)

// NATS: idem's store gets a scratch bucket <scratch> (created by the
// store's own migrate, with the DSN's replicas and storage), the raw side
// a bucket <scratch>_raw of the same settings; both are deleted at the
// end. The raw side is what a user of the bucket would write: Create (a
// publish that expects no value), Update at the revision Create returned,
// Get.
func openNATSTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	nc, bucket, err := storeopen.NATSConnect(d)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	rawName := name + "_raw"
	rawCfg := bucket
	rawCfg.Bucket = rawName
	if err := natsstore.CreateBucket(ctx, nc, rawCfg); err != nil {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var kv jetstream.KeyValue
		if kv, err = js.KeyValue(ctx, rawName); err == nil {
			storage := "file"
			if bucket.Memory {
				storage = "memory"
			}
			dur := fmt.Sprintf("bucket replicas=%d, storage=%s, server %s", bucket.Replicas, storage, nc.ConnectedServerVersion())
			cleanup := func(ctx context.Context) error {
				defer nc.Close()
				return errors.Join(ignoreMissing(js.DeleteKeyValue(ctx, name)), ignoreMissing(js.DeleteKeyValue(ctx, rawName)))
			}
			return &target{idemDSN: natsDSN(d.Raw, name), raw: &natsRaw{kv: kv}, cleanup: cleanup,
				durability: dur, durabilityNote: natsDurabilityNote(bucket.Replicas, bucket.Memory)}, nil
		}
	}
	_ = js.DeleteKeyValue(ctx, rawName)
	nc.Close()
	return nil, err
}

func ignoreMissing(err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	return err
}

// natsDSN is raw with its bucket replaced by bucket.
func natsDSN(raw, bucket string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	authority, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.IndexByte(authority, '/'); i >= 0 {
		authority = authority[:i]
	}
	out := scheme + "://" + authority + "/" + bucket
	if hasQuery {
		out += "?" + query
	}
	return out
}

// natsDurabilityNote says what a bucket of fewer than 3 replicas or in
// memory can lose.
func natsDurabilityNote(replicas int, memory bool) string {
	switch {
	case memory:
		return "storage=memory: a restart of the servers forgets every claim"
	case replicas < natsstore.MinReplicas:
		return fmt.Sprintf("replicas=%d: claims the server had not synced to disk (sync_interval) are lost when its machine crashes", replicas)
	}
	return ""
}

// natsRaw is the raw side: one KV bucket, the revision of each key's
// Create kept for its Update.
type natsRaw struct {
	kv   jetstream.KeyValue
	revs sync.Map // key → uint64
}

func (r *natsRaw) insert(ctx context.Context, key string) (bool, error) {
	k := "raw." + key
	rev, err := r.kv.Create(ctx, k, []byte(benchAttempt))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.revs.Store(k, rev)
	return true, nil
}

func (r *natsRaw) update(ctx context.Context, key string, result []byte) error {
	k := "raw." + key
	rev, ok := r.revs.LoadAndDelete(k)
	if !ok {
		return fmt.Errorf("raw update of %s before its insert", key)
	}
	_, err := r.kv.Update(ctx, k, result, rev.(uint64))
	return err
}

func (r *natsRaw) read(ctx context.Context, key string) (bool, error) {
	_, err := r.kv.Get(ctx, "raw."+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (r *natsRaw) close() error { return nil }
