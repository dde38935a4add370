package amqp091

type Table map[string]interface{}

type Connection struct{}
type Channel struct{}
type Queue struct{}
type Delivery struct{}

func Dial(url string) (*Connection, error)       { return nil, nil }
func (c *Connection) Channel() (*Channel, error) { return nil, nil }

func (ch *Channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args Table) (Queue, error) {
	return Queue{}, nil
}

func (ch *Channel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args Table) (<-chan Delivery, error) {
	return nil, nil
}
