package retry

type Option func()

func Attempts(n uint) Option { return nil }

func Do(f func() error, opts ...Option) error { return nil }
