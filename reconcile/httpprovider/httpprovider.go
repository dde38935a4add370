// Package httpprovider asks a provider's HTTP lookup endpoint, one GET per
// forwarded key, as a [reconcile.Provider].
//
// The URL template holds "{key}", replaced by the forwarded key (escaped as
// a path segment, or as a query value when it sits after "?"). The answer:
//
//	200 with a JSON object: {"key": "...", "amount": 1250, "currency": "EUR",
//	    "status": "applied", "applied_at": "2025-03-01T12:00:00Z"}
//	    (status as in [reconcile.ParseStatus]; the key must be the one asked)
//	404: the provider has no record of the key ([reconcile.ErrNotApplied])
//	anything else: the provider cannot tell now (an error; the record stays)
//
// Listing is optional: with [Config.ListURL], AppliedSince GETs it with
// since=<RFC 3339> added to the query and expects a JSON array of the same
// objects. Without it, AppliedSince yields [reconcile.ErrListUnsupported].
package httpprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idem/reconcile"
)

// Placeholder is the part of the URL template replaced by the key.
const Placeholder = "{key}"

// Config configures a [Provider].
type Config struct {
	// URLTemplate is the lookup URL with "{key}" where the forwarded key
	// goes. Required.
	URLTemplate string
	// ListURL, when set, lists entries applied since a time. Defaults to
	// none (listing unsupported).
	ListURL string
	// Header is added to every request (authorization). Defaults to none.
	Header http.Header
	// Client sends the requests. Defaults to a client with a 10s timeout.
	Client *http.Client
	// MaxBody bounds an answer's size. Defaults to 1 MiB (64 MiB for the
	// listing).
	MaxBody int64
}

// Provider is an HTTP lookup provider, safe for concurrent use.
type Provider struct {
	cfg     Config
	inQuery bool
}

var _ reconcile.Provider = (*Provider)(nil)

// New validates cfg and returns the provider.
func New(cfg Config) (*Provider, error) {
	if !strings.Contains(cfg.URLTemplate, Placeholder) {
		return nil, fmt.Errorf("httpprovider: Config.URLTemplate %q must contain %s", cfg.URLTemplate, Placeholder)
	}
	probe := strings.ReplaceAll(cfg.URLTemplate, Placeholder, "k")
	if u, err := url.Parse(probe); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("httpprovider: Config.URLTemplate %q is not an http(s) URL", cfg.URLTemplate)
	}
	if cfg.ListURL != "" {
		if u, err := url.Parse(cfg.ListURL); err != nil || u.Host == "" {
			return nil, fmt.Errorf("httpprovider: Config.ListURL %q is not an http(s) URL", cfg.ListURL)
		}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	q := strings.Index(cfg.URLTemplate, "?")
	return &Provider{cfg: cfg, inQuery: q >= 0 && q < strings.Index(cfg.URLTemplate, Placeholder)}, nil
}

// URL returns the lookup URL for key.
func (p *Provider) URL(key string) string {
	esc := url.PathEscape(key)
	if p.inQuery {
		esc = url.QueryEscape(key)
	}
	return strings.ReplaceAll(p.cfg.URLTemplate, Placeholder, esc)
}

// entry is the JSON answer.
type entry struct {
	Key       string `json:"key"`
	Scope     string `json:"scope"`
	Amount    *int64 `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"`
	AppliedAt string `json:"applied_at"`
}

// Lookup implements [reconcile.Provider].
func (p *Provider) Lookup(ctx context.Context, key string) (reconcile.Applied, error) {
	body, status, err := p.get(ctx, p.URL(key), p.cfg.MaxBody)
	if err != nil {
		return reconcile.Applied{}, err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return reconcile.Applied{}, reconcile.ErrNotApplied
	default:
		return reconcile.Applied{}, fmt.Errorf("httpprovider: lookup answered %d", status)
	}
	return decodeLookup(body, key)
}

// decodeLookup reads a lookup answer for key: one JSON entry, for that key.
func decodeLookup(body []byte, key string) (reconcile.Applied, error) {
	var e entry
	if err := json.Unmarshal(body, &e); err != nil {
		return reconcile.Applied{}, fmt.Errorf("httpprovider: lookup answer: %w", err)
	}
	a, err := e.applied()
	if err != nil {
		return reconcile.Applied{}, err
	}
	if a.Key != key {
		return reconcile.Applied{}, fmt.Errorf("httpprovider: asked for key %q, answered for %q", key, a.Key)
	}
	a.Result = body
	return a, nil
}

// AppliedSince implements [reconcile.Provider].
func (p *Provider) AppliedSince(ctx context.Context, since time.Time) iter.Seq2[reconcile.Applied, error] {
	return func(yield func(reconcile.Applied, error) bool) {
		if p.cfg.ListURL == "" {
			yield(reconcile.Applied{}, reconcile.ErrListUnsupported)
			return
		}
		entries, err := p.list(ctx, since)
		if err != nil {
			yield(reconcile.Applied{}, err)
			return
		}
		for _, e := range entries {
			a, err := e.applied()
			if !yield(a, err) || err != nil {
				return
			}
		}
	}
}

func (p *Provider) list(ctx context.Context, since time.Time) ([]entry, error) {
	u, _ := url.Parse(p.cfg.ListURL) // validated by New
	q := u.Query()
	q.Set("since", since.UTC().Format(time.RFC3339Nano))
	u.RawQuery = q.Encode()
	body, status, err := p.get(ctx, u.String(), 64*p.cfg.MaxBody)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("httpprovider: listing answered %d", status)
	}
	var entries []entry
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("httpprovider: listing: %w", err)
	}
	return entries, nil
}

func (p *Provider) get(ctx context.Context, u string, limit int64) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("httpprovider: %w", err)
	}
	for k, vs := range p.cfg.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("httpprovider: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("httpprovider: read answer: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, 0, fmt.Errorf("httpprovider: answer larger than %d bytes", limit)
	}
	return body, resp.StatusCode, nil
}

func (e entry) applied() (reconcile.Applied, error) {
	a := reconcile.Applied{Key: e.Key, Scope: e.Scope, Currency: strings.ToUpper(e.Currency)}
	if e.Key == "" || e.Amount == nil || e.Currency == "" {
		return a, errors.New("httpprovider: answer lacks key, amount or currency")
	}
	a.Amount = *e.Amount
	var err error
	if a.Status, err = reconcile.ParseStatus(strings.ToLower(e.Status)); err != nil {
		return a, err
	}
	if a.AppliedAt, err = time.Parse(time.RFC3339Nano, e.AppliedAt); err != nil {
		return a, fmt.Errorf("httpprovider: applied_at %q is not an RFC 3339 time", e.AppliedAt)
	}
	a.AppliedAt = a.AppliedAt.UTC()
	return a, nil
}
