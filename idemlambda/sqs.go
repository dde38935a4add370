package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
)

// SQSHandler performs one SQS record's effect. Return nil when it is
// done; an error wrapped with idem.Release when nothing happened (the
// record is redelivered and runs again); one wrapped with idem.Unknown
// when the effect may or may not have happened; any other error when it
// failed (recorded, never re-run).
type SQSHandler func(ctx context.Context, m events.SQSMessage) error

// SQS runs each record of an SQS batch once and answers with a partial
// batch response (the event source mapping needs
// FunctionResponseTypes: ReportBatchItemFailures):
//
//   - a new record runs, its outcome is recorded, and it is acknowledged
//     (left out of batchItemFailures);
//   - a redelivered record whose outcome is recorded is acknowledged
//     without running (a replay);
//   - a record another invocation is running (in flight), one whose
//     handler released it, one whose handler failed or whose outcome is
//     unknown, and one with the same key but another body are reported in
//     batchItemFailures: SQS redelivers it after its visibility timeout,
//     and the queue's redrive policy moves it to the dead-letter queue
//     after maxReceiveCount. A failed or unknown record is never re-run by
//     a redelivery: each one answers from the record;
//   - a record reached when less than Config.DeadlineMargin is left
//     before the invocation's deadline is reported without a claim, and
//     so are the records after it.
//
// On a FIFO queue (an ARN ending in .fifo) the first record reported
// stops the batch: every later record is reported too, unprocessed, so
// that order within a message group holds.
type SQS struct {
	cfg Config
	h   SQSHandler
	pointers
}

// NewSQS returns the SQS batch wrapper of h (lambda.Start(s.Handle)).
// Config.Scope, KeyHeader, Optional and ReleaseStatuses do not apply:
// records are scoped by their queue's ARN and always keyed, by the
// message id unless Config.KeyPointer points into the record.
func NewSQS(cfg Config, h SQSHandler) (*SQS, error) {
	if h == nil {
		return nil, errors.New("idemlambda: NewSQS: handler is nil")
	}
	ptrs, err := cfg.fill("sqs")
	if err != nil {
		return nil, err
	}
	return &SQS{cfg: cfg, h: h, pointers: ptrs}, nil
}

// sqsRecord carries one record through consumer.Message to the handler.
type sqsRecord struct {
	msg    events.SQSMessage
	doc    any
	docErr error
}

func (r *sqsRecord) lookup(p Pointer) (any, error) {
	if r.doc == nil && r.docErr == nil {
		b, err := json.Marshal(r.msg)
		if err == nil {
			r.doc, err = decodeJSON(b)
		}
		r.docErr = err
	}
	if r.docErr != nil {
		return nil, r.docErr
	}
	return p.Lookup(r.doc)
}

// Handle processes a batch and returns the records to redeliver.
func (s *SQS) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var out events.SQSEventResponse
	stop := false
	for i := range ev.Records {
		m := &ev.Records[i]
		if stop {
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			continue
		}
		d := s.process(ctx, m)
		if d.Action == consumer.ActionAck {
			continue
		}
		out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		if strings.HasSuffix(m.EventSourceARN, ".fifo") || errors.Is(d.Err, ErrNoTimeLeft) {
			stop = true
		}
	}
	return out, nil
}

// process runs one record through a consumer.Processor whose effect is
// bounded by what the invocation's deadline leaves.
func (s *SQS) process(ctx context.Context, m *events.SQSMessage) consumer.Decision {
	pol, err := bound(ctx, s.cfg.Policy, s.cfg.Engine.Config().EffectTimeout, s.cfg.DeadlineMargin, time.Now())
	if err != nil {
		return consumer.Decision{Action: consumer.ActionRetry, Err: err}
	}
	rec := &sqsRecord{msg: *m}
	ccfg := consumer.Config{
		Engine: s.cfg.Engine, Operation: s.cfg.Operation, Policy: pol,
		Key: s.key(rec), Fingerprint: s.fingerprint(rec),
	}
	p, err := consumer.New(ccfg, func(ctx context.Context, _ *consumer.Message) error {
		return s.h(ctx, rec.msg)
	})
	if err != nil {
		return consumer.Decision{Action: consumer.ActionRetry, Err: err}
	}
	delivery, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	return p.Process(ctx, &consumer.Message{ID: m.MessageId, Source: m.EventSourceARN, Body: []byte(m.Body), Delivery: delivery})
}

func (s *SQS) key(rec *sqsRecord) consumer.KeyFunc {
	if s.keyPtr == nil {
		return consumer.MessageID
	}
	p := *s.keyPtr
	return func(*consumer.Message) (idem.Key, error) {
		v, err := rec.lookup(p)
		if err != nil {
			return "", errors.Join(consumer.ErrNoKey, err)
		}
		str, err := keyString(v)
		if err != nil {
			return "", err
		}
		return idem.ParseKey(str)
	}
}

func (s *SQS) fingerprint(rec *sqsRecord) consumer.FingerprintFunc {
	if len(s.fpPtrs) == 0 {
		return consumer.BodyFingerprint
	}
	return func(*consumer.Message) idem.Fingerprint {
		fp, err := pointerFingerprint(rec.lookup, s.fpPtrs)
		if err != nil {
			return idem.NewFingerprint([]byte(rec.msg.Body))
		}
		return fp
	}
}
