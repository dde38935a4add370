package redis

import (
	"context"
	"time"
)

type Client struct{}

type IntCmd struct{}

func (c *IntCmd) Val() int64             { return 0 }
func (c *IntCmd) Result() (int64, error) { return 0, nil }

type BoolCmd struct{}

func (c *BoolCmd) Val() bool             { return false }
func (c *BoolCmd) Result() (bool, error) { return false, nil }

type StatusCmd struct{}

func (c *StatusCmd) Err() error { return nil }

func (c *Client) Exists(ctx context.Context, keys ...string) *IntCmd { return nil }
func (c *Client) Set(ctx context.Context, key string, v any, ttl time.Duration) *StatusCmd {
	return nil
}
func (c *Client) SetNX(ctx context.Context, key string, v any, ttl time.Duration) *BoolCmd {
	return nil
}
