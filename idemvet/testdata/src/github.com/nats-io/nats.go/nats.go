package nats

import "time"

type Conn struct{}

func Connect(url string) (*Conn, error) { return nil, nil }

type JetStreamContext interface {
	AddConsumer(stream string, cfg *ConsumerConfig) (*ConsumerInfo, error)
	Subscribe(subj string, cb MsgHandler, opts ...SubOpt) (*Subscription, error)
}

func (c *Conn) JetStream() (JetStreamContext, error) { return nil, nil }

type ConsumerInfo struct{}
type Subscription struct{}
type Msg struct{}
type MsgHandler func(*Msg)
type SubOpt interface{}

func MaxDeliver(n int) SubOpt        { return nil }
func AckWait(d time.Duration) SubOpt { return nil }
func Durable(name string) SubOpt     { return nil }

type ConsumerConfig struct {
	Durable    string
	AckWait    time.Duration
	MaxDeliver int
	BackOff    []time.Duration
}

type StreamConfig struct {
	Name     string
	Subjects []string
	MaxAge   time.Duration
}
