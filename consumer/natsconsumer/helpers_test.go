package natsconsumer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/testenv"
)

// env is one test's isolated stream (subjects <prefix>.>), its dead-letter
// stream, and a pull consumer.
type env struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	name   string // stream name
	prefix string // subject prefix
	dlq    string // dead-letter subject
}

func unique() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newEnv(t *testing.T, dupWindow time.Duration) *env {
	t.Helper()
	url := testenv.NATS.Need(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := unique()
	e := &env{nc: nc, js: js, name: "IDEMT_" + strings.ToUpper(id), prefix: "idemt." + id, dlq: "idemt." + id + "-dlq"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: e.name, Subjects: []string{e.prefix + ".>"}, Duplicates: dupWindow}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.name + "_DLQ", Subjects: []string{e.dlq}}); err != nil {
		t.Fatalf("create dlq stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, e.name)
		_ = js.DeleteStream(ctx, e.name+"_DLQ")
	})
	return e
}

func (e *env) consumer(t *testing.T, ackWait time.Duration) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.js.CreateOrUpdateConsumer(ctx, e.name, jetstream.ConsumerConfig{
		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: 20,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return c
}

// deadLetters returns the messages on the dead-letter stream.
func (e *env) deadLetters(t *testing.T, want int) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.js.OrderedConsumer(ctx, e.name+"_DLQ", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for len(out) < want {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("dead letters: got %d, want %d: %v", len(out), want, err)
		}
		out = append(out, m)
	}
	return out
}

func jetstreamMsgID(key string) jetstream.PublishOpt { return jetstream.WithMsgID(key) }
