package backoff

type BackOff interface{ NextBackOff() int }

type ExponentialBackOff struct{}

func (b *ExponentialBackOff) NextBackOff() int { return 0 }

func NewExponentialBackOff() *ExponentialBackOff { return nil }

type Operation func() error

func Retry(o Operation, b BackOff) error                           { return nil }
func RetryNotify(o Operation, b BackOff, n func(error, int)) error { return nil }
