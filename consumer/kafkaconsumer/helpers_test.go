package kafkaconsumer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/kafkaconsumer"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

const (
	topic    = "payments"
	dlqTopic = "payments-dlq"
	// receiptsTopic receives the consume-process-produce loop's output.
	receiptsTopic = "receipts"
)

// cluster is an in-process Kafka cluster (kfake) with the topic (two
// partitions) and its dead-letter topic, and a client to produce and
// inspect it.
type cluster struct {
	addrs []string
	cl    *kgo.Client
	adm   *kadm.Client
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(2, topic, dlqTopic, receiptsTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &cluster{addrs: c.ListenAddrs()}
	k.cl, err = kgo.NewClient(kgo.SeedBrokers(k.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.cl.Close)
	k.adm = kadm.NewClient(k.cl)
	return k
}

// produce stores body on partition with key as its Idem-Key header (none
// when key is empty) and returns its offset.
func (k *cluster) produce(t testing.TB, partition int32, key, body string) int64 {
	t.Helper()
	r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(body)}
	if key != "" {
		r.Headers = []kgo.RecordHeader{{Key: kafkaconsumer.DefaultKeyHeader, Value: []byte(key)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return r.Offset
}

// committed returns the group's committed offset of each partition of the
// topic (absent: none committed).
func (k *cluster) committed(t testing.TB, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[int32]int64{}
	os, err := k.adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // nothing committed yet
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// drained reports whether the group has committed every partition to its
// end.
func (k *cluster) drained(t testing.TB, group string) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := k.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		got := k.committed(t, group)
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && got[o.Partition] != o.Offset {
				ok = false
			}
		})
		return ok
	}
}

// resetOffsets commits offset 0 for every partition: an operator's offset
// reset, while no member is in the group.
func (k *cluster) resetOffsets(t testing.TB, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	for p := int32(0); p < 2; p++ {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if err := k.adm.CommitAllOffsets(ctx, group, os); err != nil {
		t.Fatal(err)
	}
}

// deadLetters reads want records from the dead-letter topic.
func (k *cluster) deadLetters(t testing.TB, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addrs...), kgo.ConsumeTopics(dlqTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("dead letters: got %d, want %d", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// groupOpts are a group member's client options for the tests: short
// session and heartbeat, so a killed member leaves the group in a second.
func groupOpts(addrs []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
}

// effects counts effects per key.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) add(k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[k]++
}

func (e *effects) get(k string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[k]
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a cluster with one store, shared by the engines of the test's
// consumers.
type rig struct {
	*cluster
	store *memstore.Store
	logs  *syncBuf
}

func newRig(t *testing.T) *rig {
	t.Helper()
	// A consumer that blocks fails the test binary with every goroutine's
	// stack, instead of hanging until go test's timeout.
	storetest.Deadline(t, 2*time.Minute)
	r := &rig{cluster: newCluster(t), store: memstore.New(), logs: &syncBuf{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *rig) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// engine is a new engine on the rig's store; obs (may be nil) sees its
// events.
func (r *rig) engine(t *testing.T, obs idem.Observer) *idem.Engine {
	t.Helper()
	e, err := idem.New(r.store, idem.Config{Observer: obs, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func (r *rig) processor(t *testing.T, e *idem.Engine, h consumer.Handler) *consumer.Processor {
	t.Helper()
	p, err := consumer.New(consumer.Config{Engine: e, RetryDelay: 100 * time.Millisecond, Logger: r.logger()}, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// member is a running group member.
type member struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// stop ends Run (the record in hand is settled) and closes the client,
// which leaves the group.
func (m *member) stop(t testing.TB) {
	m.once.Do(func() {
		m.cancel()
		if err := <-m.done; err != nil {
			t.Errorf("Run: %v", err)
		}
		m.cl.Close()
	})
}

var members atomic.Int32

// join starts a member of group that runs p; cfg's Processor, Group,
// DeadLetterTopic and Logger are filled in.
func (r *rig) join(t *testing.T, group string, p *consumer.Processor, cfg kafkaconsumer.Config) *member {
	t.Helper()
	cfg.Processor, cfg.Group = p, group
	if cfg.DeadLetterTopic == "" {
		cfg.DeadLetterTopic = dlqTopic
	}
	cfg.Logger = r.logger().With("member", members.Add(1))
	c, err := kafkaconsumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(groupOpts(r.addrs), c.Opts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{cl: cl, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- c.Run(ctx, cl) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// eventually polls cond every 20ms for up to 20s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// receipts reads the committed records of receiptsTopic (read_committed:
// aborted transactions' records are not seen) until a poll of a second
// finds nothing more, and counts them by value.
func (k *cluster) receipts(t testing.TB) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addrs...), kgo.ConsumeTopics(receiptsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out[string(r.Value)]++; n++ })
		if n == 0 {
			return out
		}
	}
}
