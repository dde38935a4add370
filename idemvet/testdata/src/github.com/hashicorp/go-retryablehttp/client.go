package retryablehttp

import (
	"context"
	"net/http"
)

type Request struct {
	*http.Request
}

type Client struct{ RetryMax int }

func NewClient() *Client { return &Client{} }

func NewRequest(method, url string, body any) (*Request, error) { return nil, nil }
func NewRequestWithContext(ctx context.Context, method, url string, body any) (*Request, error) {
	return nil, nil
}
func (c *Client) Do(r *Request) (*http.Response, error)                 { return nil, nil }
func (c *Client) Post(url, ct string, body any) (*http.Response, error) { return nil, nil }
func (c *Client) Get(url string) (*http.Response, error)                { return nil, nil }
func Post(url, ct string, body any) (*http.Response, error)             { return nil, nil }
