package kafkaconsumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem/consumer"
)

// ProduceHandler performs a record's effect and returns the records to
// produce downstream, for [Consumer.RunTransact].
type ProduceHandler func(ctx context.Context, m *consumer.Message) ([]*kgo.Record, error)

// output is a produced record as recorded with the outcome.
type output struct {
	Topic     string             `json:"topic"`
	Partition int32              `json:"partition,omitempty"`
	Key       []byte             `json:"key,omitempty"`
	Value     []byte             `json:"value,omitempty"`
	Headers   []kgo.RecordHeader `json:"headers,omitempty"`
}

// Produce adapts h to a [consumer.ValueHandler] (for [consumer.NewValue]):
// the records h returns are the value recorded with the outcome, so a
// redelivery produces them again from the record without running h.
func Produce(h ProduceHandler) consumer.ValueHandler {
	return func(ctx context.Context, m *consumer.Message) ([]byte, error) {
		recs, err := h(ctx, m)
		if err != nil {
			return nil, err
		}
		out := make([]output, len(recs))
		for i, r := range recs {
			out[i] = output{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
		}
		return json.Marshal(out)
	}
}

func outputs(v []byte) ([]*kgo.Record, error) {
	if len(v) == 0 {
		return nil, nil
	}
	var out []output
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("kafkaconsumer: recorded value is not a list of records (was the processor made with Produce?): %w", err)
	}
	recs := make([]*kgo.Record, len(out))
	for i, o := range out {
		recs[i] = &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: o.Headers}
	}
	return recs, nil
}

// TransactOpts returns the client options [Consumer.RunTransact] relies
// on: the group and manual commits (the transaction commits the offsets).
// Add the seed brokers, the topics, kgo.TransactionalID and
// kgo.FetchIsolationLevel(kgo.ReadCommitted()), and make the session with
// kgo.NewGroupTransactSession.
func (c *Consumer) TransactOpts() []kgo.Opt {
	return []kgo.Opt{kgo.ConsumerGroup(c.cfg.Group), kgo.DisableAutoCommit()}
}

// RunTransact is the consume-process-produce loop: for each poll it begins
// a Kafka transaction, processes the records in order (the processor made
// with consumer.NewValue and [Produce]), produces each record's output (or
// its dead letter) in the transaction, and ends it, committing outputs and
// offsets together.
//
// The outcome, with the output records, is recorded before the
// transaction commits. A transaction that aborts (a rebalance, a crash, a
// fenced producer) leaves the outcome recorded and the records polled
// again: their redelivery replays, producing the recorded output in the
// next transaction without running the effect. Kafka makes the output
// appear once; idem makes the effect outside Kafka happen once.
//
// A record that cannot be settled (a retry still waiting when ctx ends)
// aborts the transaction, so no offset passes it. RunTransact returns nil
// when ctx ends, or the error that left the session unusable.
func (c *Consumer) RunTransact(ctx context.Context, s *kgo.GroupTransactSession) error {
	if s == nil {
		return errors.New("kafkaconsumer: RunTransact: session is nil")
	}
	for ctx.Err() == nil {
		fs := s.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: fetch failed", "topic", topic, "partition", p, "err", err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("kafkaconsumer: begin transaction: %w", err)
		}
		ok := true
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			if !ok {
				return
			}
			out, settled := c.transactOne(ctx, r)
			if !settled {
				ok = false
				return
			}
			for _, o := range out {
				s.Produce(ctx, o, func(_ *kgo.Record, err error) {
					if err != nil && perr == nil {
						perr = err
					}
				})
			}
		})
		committed, err := s.End(context.WithoutCancel(ctx), kgo.TransactionEndTry(ok))
		if err != nil {
			return fmt.Errorf("kafkaconsumer: end transaction: %w", err)
		}
		if !committed {
			// The records are polled again and replay from their records.
			c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: transaction aborted; its records are delivered again", "produce_err", perr)
		}
	}
	return nil
}

// transactOne processes r until it is settled: its output (acked) or its
// dead letter, to produce in the transaction. false: still waiting for a
// retry when ctx ended.
func (c *Consumer) transactOne(ctx context.Context, r *kgo.Record) ([]*kgo.Record, bool) {
	m := c.message(r)
	for attempt := 1; ; attempt++ {
		m.Delivery = attempt
		d := c.cfg.Processor.Process(context.WithoutCancel(ctx), m)
		switch d.Action {
		case consumer.ActionAck:
			out, err := outputs(d.Value)
			if err == nil {
				return out, true
			}
			c.cfg.Logger.ErrorContext(ctx, "kafkaconsumer: recorded output unreadable; dead-lettered", "err", err)
			d.Reason, d.Err = consumer.ReasonFailed, err
			fallthrough
		case consumer.ActionDeadLetter:
			if c.cfg.DeadLetterTopic == "" {
				c.cfg.Logger.WarnContext(ctx, "kafkaconsumer: no dead-letter topic; committing past the record",
					"reason", string(d.Reason), "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
				return nil, true
			}
			return []*kgo.Record{DeadLetter(c.cfg.DeadLetterTopic, r, d)}, true
		}
		t := time.NewTimer(d.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false
		}
	}
}
