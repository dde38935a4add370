package amqpconsumer_test

// The crash tests run this test binary again as a consumer process (the
// "child"), selected by IDEM_CRASH_CHILD=1, and kill it with SIGKILL at a
// chosen point (internal/crashtest). A SIGTERM stops it gracefully instead:
// Run settles what it holds and the connection is closed.

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/amqpconsumer"
	"github.com/idemkit/idem/internal/crashtest"
)

func TestMain(m *testing.M) { crashtest.Main(m, child) }

// child consumes IDEM_CHILD_QUEUE with a SQLite store until killed, or until
// SIGTERM, when it stops gracefully.
func child() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c := crashtest.FromEnv()
	st, eng, err := c.Open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	defer eng.Close()
	logger := crashtest.Logger()
	p, err := consumer.New(c.Config(eng, logger), c.Handler())
	if err != nil {
		return err
	}
	conn, err := amqp.Dial(os.Getenv("IDEM_CHILD_AMQP"))
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	crashtest.Say("READY")
	if err := amqpconsumer.Run(ctx, ch, amqpconsumer.Config{Processor: p, Queue: os.Getenv("IDEM_CHILD_QUEUE"), Logger: logger}); err != nil {
		return err
	}
	return ch.Close()
}
