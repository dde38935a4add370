package kafkaconsumer_test

// The crash tests run this test binary again as a consumer process (the
// "child"), selected by IDEM_CRASH_CHILD=1, and kill it with SIGKILL at a
// chosen point (internal/crashtest). The child joins the group "billing"
// on the parent's kfake cluster, over loopback.

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/kafkaconsumer"
	"github.com/idemkit/idem/internal/crashtest"
)

func TestMain(m *testing.M) { crashtest.Main(m, child) }

// child consumes the topic in group billing until killed, with a SQLite
// store: the file handler (mode "plain") or the ledger handler in one
// SQLite transaction with the claim and the record (mode "tx").
func child() error {
	ctx := context.Background()
	logger := crashtest.Logger()
	c := crashtest.FromEnv()
	st, eng, err := c.Open(ctx)
	if err != nil {
		return err
	}
	cfg := c.Config(eng, logger)
	addrs := strings.Split(os.Getenv("IDEM_CHILD_KAFKA"), ",")
	var p *consumer.Processor
	switch os.Getenv("IDEM_CHILD_MODE") {
	case "transact":
		return transactChild(ctx, c, cfg, addrs)
	case "tx":
		if _, err := st.DB().ExecContext(ctx, crashtest.LedgerDDL); err != nil {
			return err
		}
		p, err = consumer.NewTx(cfg, consumer.SQL(st.DB(), func(tx *sql.Tx) idem.Store { return st.WithTx(tx) }), crashtest.LedgerHandler)
	default:
		p, err = consumer.New(cfg, c.Handler())
	}
	if err != nil {
		return err
	}
	kc, err := kafkaconsumer.New(kafkaconsumer.Config{Processor: p, Group: "billing", DeadLetterTopic: dlqTopic, Logger: logger})
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(groupOpts(addrs), kc.Opts()...)...)
	if err != nil {
		return err
	}
	crashtest.Say("READY")
	return kc.Run(ctx, cl)
}

// transactChild runs the consume-process-produce loop: the file handler's
// effect, and a receipt (the message ID) produced to receiptsTopic in the
// transaction that commits the offsets.
func transactChild(ctx context.Context, c crashtest.Child, cfg consumer.Config, addrs []string) error {
	h := c.Handler()
	p, err := consumer.NewValue(cfg, kafkaconsumer.Produce(func(ctx context.Context, m *consumer.Message) ([]*kgo.Record, error) {
		if err := h(ctx, m); err != nil {
			return nil, err
		}
		return []*kgo.Record{{Topic: receiptsTopic, Value: []byte(m.ID)}}, nil
	}))
	if err != nil {
		return err
	}
	kc, err := kafkaconsumer.New(kafkaconsumer.Config{Processor: p, Group: "billing", DeadLetterTopic: dlqTopic, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	s, err := kgo.NewGroupTransactSession(append(groupOpts(addrs), append(kc.TransactOpts(),
		kgo.TransactionalID("billing-tx"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)...)
	if err != nil {
		return err
	}
	crashtest.Say("READY")
	return kc.RunTransact(ctx, s)
}
