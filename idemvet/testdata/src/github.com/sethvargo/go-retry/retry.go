package retry

import (
	"context"
	"time"
)

type Backoff interface{ Next() (time.Duration, bool) }

func NewExponential(d time.Duration) Backoff { return nil }

func RetryableError(err error) error { return err }

func Do(ctx context.Context, b Backoff, f func(ctx context.Context) error) error { return nil }
