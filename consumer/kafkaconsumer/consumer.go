package kafkaconsumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemkit/idem/consumer"
)

// DefaultKeyHeader is the record header read as the key when
// Config.KeyHeader is empty.
const DefaultKeyHeader = "Idem-Key"

// Headers written on dead letters, beside the original record's headers.
const (
	HeaderReason    = "Idem-Reason"     // a consumer.Reason
	HeaderScope     = "Idem-Scope"      // the record's scope
	HeaderKey       = "Idem-Record-Key" // the idem key the decision is about
	HeaderState     = "Idem-State"      // the idem record's state, when known
	HeaderError     = "Idem-Error"      // the error behind the decision
	HeaderTopic     = "Idem-Topic"      // the original topic
	HeaderPartition = "Idem-Partition"  // the original partition
	HeaderOffset    = "Idem-Offset"     // the original offset
)

// Config configures a [Consumer].
type Config struct {
	// Processor runs each record's effect. Required.
	Processor *consumer.Processor
	// Group is the consumer group. Required: the client must be made with
	// the options of [Consumer.Opts], which join this group, and the
	// default scope of a record is "<group>/<topic>".
	Group string
	// KeyHeader is the header whose value is a record's key (its
	// consumer.Message ID). Defaults to [DefaultKeyHeader]. A record
	// without it is dead-lettered with reason invalid_key.
	KeyHeader string
	// OffsetKey keys a record by "<topic>:<partition>:<offset>" instead of
	// a header, for events that carry no id. It is the weaker choice: it
	// deduplicates redeliveries of the same stored record (rebalances,
	// crashes, offset resets), but the same event produced twice (a
	// producer retry without idempotence, a re-publish) is stored at a new
	// offset and is a new key.
	OffsetKey bool
	// DeadLetterTopic receives dead letters (failed, mismatched, unkeyed
	// and unknown records) with their headers and the Idem-* headers.
	// Defaults to none: the record's offset is then committed past with a
	// warning, and the idem record is what remains.
	DeadLetterTopic string
	// MaxPollRecords bounds the records taken by one poll. Defaults to 100.
	MaxPollRecords int
	// CommitTimeout bounds each offset commit and dead-letter produce.
	// Defaults to 10s.
	CommitTimeout time.Duration
	// Logger receives commit and dead-letter failures. Defaults to
	// discarding logs.
	Logger *slog.Logger
}

// Consumer settles the records of a consumer group by the processor's
// decisions, committing a partition's offset only past records whose
// outcome is recorded.
type Consumer struct {
	cfg Config

	mu    sync.Mutex
	owned map[tp]*partition // the partitions assigned to this member
}

type tp struct {
	topic     string
	partition int32
}

// partition is one assigned partition's state.
type partition struct {
	tp
	// run is held while the partition's records are processed; a
	// revocation takes it to wait for the record in hand.
	run  sync.Mutex
	stop chan struct{} // closed when the partition is revoked or lost

	omu       sync.Mutex
	next      kgo.EpochOffset // the offset after the last settled record
	committed int64           // the last offset committed, -1 for none
}

func (p *partition) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// settled notes r as settled: its outcome is recorded (or it is
// dead-lettered), so the partition may be committed past it.
func (p *partition) settled(r *kgo.Record) {
	p.omu.Lock()
	defer p.omu.Unlock()
	p.next = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
}

// New returns a consumer for cfg.
func New(cfg Config) (*Consumer, error) {
	if cfg.Processor == nil || cfg.Group == "" {
		return nil, errors.New("kafkaconsumer: New: Config.Processor and Config.Group are required")
	}
	if cfg.MaxPollRecords < 0 || cfg.CommitTimeout < 0 {
		return nil, errors.New("kafkaconsumer: Config.MaxPollRecords and Config.CommitTimeout must not be negative")
	}
	if cfg.KeyHeader == "" {
		cfg.KeyHeader = DefaultKeyHeader
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = 100
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Consumer{cfg: cfg, owned: map[tp]*partition{}}, nil
}

// Opts returns the client options the consumer relies on: the group,
// manual commits, and the rebalance callbacks that settle a revoked
// partition's record in hand and commit it before the partition moves. Add
// the seed brokers and topics (kgo.ConsumeTopics) and make the client with
// kgo.NewClient; do not override these options.
func (c *Consumer) Opts() []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
	}
}

func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range m {
		for _, p := range ps {
			k := tp{topic, p}
			if _, ok := c.owned[k]; !ok {
				c.owned[k] = &partition{tp: k, stop: make(chan struct{}), committed: -1, next: kgo.EpochOffset{Epoch: -1, Offset: -1}}
			}
		}
	}
}

// revoked runs in the rebalance, before the partitions move to another
// member: it stops their processing after the record in hand (whose effect
// finishes and whose outcome is recorded), then commits them up to the
// last settled record. The rebalance waits for it, up to the group's
// rebalance timeout.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	if len(m) > 0 {
		c.cfg.Logger.InfoContext(ctx, "kafkaconsumer: partitions revoked; finishing the record in hand", "partitions", fmt.Sprint(m))
	}
	ps := c.release(m)
	if len(ps) == 0 {
		return
	}
	c.commit(ctx, cl, ps)
}

// lost: the partitions may already be someone else's; a commit would
// fail. Processing stops after the record in hand.
func (c *Consumer) lost(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	if len(m) > 0 {
		c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: partitions lost; their offsets are not committed", "partitions", fmt.Sprint(m))
	}
	c.release(m)
}

// release removes m's partitions from this member, stops their processing
// and waits for the record in hand.
func (c *Consumer) release(m map[string][]int32) []*partition {
	var out []*partition
	c.mu.Lock()
	for topic, ps := range m {
		for _, p := range ps {
			if st, ok := c.owned[tp{topic, p}]; ok {
				delete(c.owned, tp{topic, p})
				close(st.stop)
				out = append(out, st)
			}
		}
	}
	c.mu.Unlock()
	for _, st := range out {
		st.run.Lock()
		//lint:ignore SA2001 waiting for the record in hand is the point
		st.run.Unlock()
	}
	return out
}

// Run polls cl until ctx ends or cl is closed, processing each polled
// partition's records in order, one goroutine per partition, and commits
// after each poll. cl must be made with [Consumer.Opts]. On return the
// settled offsets are committed; close cl afterwards (which leaves the
// group).
func (c *Consumer) Run(ctx context.Context, cl *kgo.Client) error {
	if cl == nil {
		return errors.New("kafkaconsumer: Run: client is nil")
	}
	defer func() {
		c.commit(context.WithoutCancel(ctx), cl, c.all())
	}()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: fetch failed", "topic", topic, "partition", p, "err", err)
			}
		})
		var wg sync.WaitGroup
		fs.EachPartition(func(f kgo.FetchTopicPartition) {
			if len(f.Records) == 0 {
				return
			}
			c.mu.Lock()
			st := c.owned[tp{f.Topic, f.Partition}]
			c.mu.Unlock()
			if st == nil {
				return // revoked since the fetch: the new owner reads them
			}
			wg.Go(func() { c.process(ctx, cl, st, f.Records) })
		})
		wg.Wait()
		c.commit(ctx, cl, c.all())
	}
	return nil
}

func (c *Consumer) all() []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*partition, 0, len(c.owned))
	for _, st := range c.owned {
		out = append(out, st)
	}
	return out
}

// process settles recs, one partition's, in order. It stops at the first
// record it could not settle (the partition revoked or ctx ended while the
// record waited to be retried): no later record is settled before it, so
// no commit passes it.
func (c *Consumer) process(ctx context.Context, cl *kgo.Client, st *partition, recs []*kgo.Record) {
	st.run.Lock()
	defer st.run.Unlock()
	for _, r := range recs {
		if st.stopped() || ctx.Err() != nil {
			return
		}
		if !c.settle(ctx, cl, st, r) {
			return
		}
		st.settled(r)
	}
}

// settle processes r until its decision is carried out: true when r is
// acked or dead-lettered, false when it still waits (retry) and the
// partition was revoked or ctx ended.
func (c *Consumer) settle(ctx context.Context, cl *kgo.Client, st *partition, r *kgo.Record) bool {
	m := c.message(r)
	for attempt := 1; ; attempt++ {
		// Kafka keeps no delivery count; this is the count of attempts in
		// this process, which bounds a handler that keeps releasing.
		m.Delivery = attempt
		// The record in hand is finished even when ctx ends.
		d := c.cfg.Processor.Process(context.WithoutCancel(ctx), m)
		delay := d.Delay
		switch d.Action {
		case consumer.ActionAck:
			return true
		case consumer.ActionDeadLetter:
			err := c.deadLetter(ctx, cl, r, m, d)
			if err == nil {
				return true
			}
			c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: dead letter not produced; the record is retried",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			delay = time.Second
		}
		// Retry: an in-flight duplicate, a release, a store failure. The
		// partition waits here: nothing after r is settled before r.
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-st.stop:
			t.Stop()
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// message is r's broker-neutral view.
func (c *Consumer) message(r *kgo.Record) *consumer.Message {
	m := &consumer.Message{Source: c.cfg.Group + "/" + r.Topic, Subject: r.Topic, Body: r.Value,
		Headers: make(map[string]string, len(r.Headers))}
	for _, h := range r.Headers {
		if _, ok := m.Headers[h.Key]; !ok {
			m.Headers[h.Key] = string(h.Value)
		}
	}
	if c.cfg.OffsetKey {
		m.ID = OffsetKey(r)
	} else {
		m.ID = m.Headers[c.cfg.KeyHeader]
	}
	return m
}

// OffsetKey is the key "<topic>:<partition>:<offset>" that Config.OffsetKey
// gives r.
func OffsetKey(r *kgo.Record) string {
	return r.Topic + ":" + strconv.FormatInt(int64(r.Partition), 10) + ":" + strconv.FormatInt(r.Offset, 10)
}

// deadLetter produces r, with its key, headers and the Idem-* headers, to
// the dead-letter topic and waits for the broker's acknowledgement.
func (c *Consumer) deadLetter(ctx context.Context, cl *kgo.Client, r *kgo.Record, m *consumer.Message, d consumer.Decision) error {
	if c.cfg.DeadLetterTopic == "" {
		c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: no dead-letter topic; committing past the record",
			"reason", string(d.Reason), "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
		return nil
	}
	dl := DeadLetter(c.cfg.DeadLetterTopic, r, d)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	return cl.ProduceSync(pctx, dl).FirstErr()
}

// DeadLetter returns the dead letter of r for decision d, on topic: r's
// key, value and headers, with the Idem-* headers added.
func DeadLetter(topic string, r *kgo.Record, d consumer.Decision) *kgo.Record {
	dl := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	dl.Headers = append(dl.Headers, r.Headers...)
	add := func(k, v string) { dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(HeaderReason, string(d.Reason))
	add(HeaderScope, d.Scope)
	add(HeaderKey, string(d.Key))
	if d.Record != nil {
		add(HeaderState, string(d.Record.State))
	}
	if d.Err != nil {
		add(HeaderError, d.Err.Error())
	}
	add(HeaderTopic, r.Topic)
	add(HeaderPartition, strconv.FormatInt(int64(r.Partition), 10))
	add(HeaderOffset, strconv.FormatInt(r.Offset, 10))
	return dl
}

// commit commits each of ps up to its last settled record, when that is
// past what was committed.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, ps []*partition) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	sent := map[*partition]int64{}
	for _, st := range ps {
		st.omu.Lock()
		if st.next.Offset > st.committed {
			if offsets[st.topic] == nil {
				offsets[st.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[st.topic][st.partition] = st.next
			sent[st] = st.next.Offset
		}
		st.omu.Unlock()
	}
	if len(offsets) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	var cerr error
	failed := map[tp]bool{}
	cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failed[tp{t.Topic, p.Partition}] = true
					cerr = err
				}
			}
		}
	})
	if cerr != nil {
		// Not committed: the records are delivered again and replay.
		c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: offset commit failed", "err", cerr)
		if len(failed) == 0 {
			return
		}
	}
	for st, off := range sent {
		if failed[st.tp] {
			continue
		}
		st.omu.Lock()
		if off > st.committed {
			st.committed = off
		}
		st.omu.Unlock()
	}
}
