package amqpconsumer_test

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/internal/testenv"
)

// crashRig is a fresh queue and the files of the children that consume it;
// it is a crashtest.Rig.
type crashRig struct {
	*rig
	crashtest.Files
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	return &crashRig{rig: newRig(t), Files: crashtest.NewFiles(t)}
}

func (r *crashRig) Start(t *testing.T, crash, crashKey string) *crashtest.Proc {
	t.Helper()
	return crashtest.Start(t, append([]string{
		"IDEM_CHILD_AMQP=" + testenv.AMQP.URL(),
		"IDEM_CHILD_QUEUE=" + r.queue,
	}, r.ChildEnv(crash, crashKey)...))
}

func (r *crashRig) Publish(t *testing.T, key, body string) { r.publish(t, key, body) }

func (r *crashRig) Scope() string { return r.queue }

// queueStat returns the queue's ready messages and consumers.
func (r *crashRig) queueStat(t *testing.T) (ready, consumers int) {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(r.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages, q.Consumers
}

// Finish runs a well-behaved child until every message has a succeeded
// record and none is waiting, stops it gracefully (SIGTERM: Run settles the
// deliveries in hand and the child closes its connection), and checks that
// nothing came back to the queue: every message was acked.
func (r *crashRig) Finish(t *testing.T, keys []string) {
	t.Helper()
	p := r.Start(t, "", "")
	p.Await(t, "READY")
	st := r.Store(t)
	eventually(t, "all messages recorded succeeded", func() bool {
		for _, k := range keys {
			if rec, err := st.Get(context.Background(), r.queue, k); err != nil || rec.State != idem.StateSucceeded {
				return false
			}
		}
		ready, _ := r.queueStat(t)
		return ready == 0
	})
	p.Stop(t)
	eventually(t, "the child's consumer gone", func() bool { _, c := r.queueStat(t); return c == 0 })
	if ready, _ := r.queueStat(t); ready != 0 {
		t.Fatalf("%d messages back in the queue after a clean stop; want all acked", ready)
	}
}

// A consumer process killed with SIGKILL at each phase of one message; its
// channel dies with it and RabbitMQ redelivers. After recovery every
// message's effect happened exactly once, its record is succeeded and it is
// acked (crashRig.Finish). The phases are told in crashtest.KillAtEachPhase.
func TestKillConsumerAtEachPhase(t *testing.T) {
	crashtest.KillAtEachPhase(t, func(t *testing.T) crashtest.Rig { return newCrashRig(t) })
}
