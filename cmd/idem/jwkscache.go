package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
)

// keyfunc's own refresh on an unknown key id is rate-limited as a whole
// (one every five minutes): one token with a made-up kid spends it, and an
// issuer's newly added key then gets 401 for the whole window. jwksCache
// is the key storage the proxy gives keyfunc instead. It fetches the key
// set with jwkset (at start and every refreshEvery), and on a kid it does
// not hold:
//   - a kid looked up after a refresh and still absent is negative-cached,
//     per kid, for negativeFor: repeating it costs nothing and refreshes
//     nothing;
//   - an unseen kid may refresh the set at most once per unknownEvery, a
//     short bound independent of the hourly refresh, so a stream of new
//     made-up kids costs one fetch per unknownEvery and a genuinely new key
//     is found within unknownEvery of its first token.
type jwksCache struct {
	url          string
	client       *http.Client
	log          *slog.Logger
	refreshEvery time.Duration
	unknownEvery time.Duration
	negativeFor  time.Duration
	now          func() time.Time

	mu          sync.Mutex
	keys        jwkset.Storage       // the last key set fetched
	lastUnknown time.Time            // the last refresh an unknown kid caused
	negative    map[string]time.Time // kid → until when it is known to be absent
	fetches     int                  // for tests: key set fetches so far
}

// Defaults of jwksCache.
const (
	jwksRefreshEvery = time.Hour
	jwksUnknownEvery = 5 * time.Second
	jwksNegativeFor  = time.Minute
	jwksMaxNegative  = 10000 // negative entries kept at most: a flood of kids cannot grow memory
)

// newJWKSCache fetches the key set at u (an error if it cannot) and
// refreshes it every refreshEvery until ctx ends.
func newJWKSCache(ctx context.Context, u string, log *slog.Logger) (*jwksCache, error) {
	c := &jwksCache{url: u, client: &http.Client{Timeout: 10 * time.Second}, log: log,
		refreshEvery: jwksRefreshEvery, unknownEvery: jwksUnknownEvery, negativeFor: jwksNegativeFor,
		now: time.Now, negative: map[string]time.Time{}}
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	go c.loop(ctx)
	return c, nil
}

func (c *jwksCache) loop(ctx context.Context) {
	t := time.NewTicker(c.refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.refresh(ctx); err != nil {
				c.log.Error("idem proxy: refreshing the JWKS failed; the keys fetched before stay in use", "jwks", c.url, "err", err)
			}
		}
	}
}

// refresh fetches the key set and, when it holds a usable key, makes it
// the current one.
func (c *jwksCache) refresh(ctx context.Context) error {
	fail := false
	st, err := jwkset.NewStorageFromHTTP(c.url, jwkset.HTTPClientStorageOptions{Ctx: ctx, Client: c.client,
		HTTPTimeout: c.client.Timeout, NoErrorReturnFirstHTTPReq: fail})
	c.mu.Lock()
	c.fetches++
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fetching %s: %w", c.url, err)
	}
	if keys, err := st.KeyReadAll(ctx); err != nil || len(keys) == 0 {
		return fmt.Errorf("%s holds no usable key", c.url)
	}
	c.mu.Lock()
	c.keys = st
	c.mu.Unlock()
	return nil
}

func (c *jwksCache) current() jwkset.Storage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys
}

// KeyRead returns the key kid from the current set or, for a kid it does
// not hold, from a refreshed one, within the limits above.
func (c *jwksCache) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	k, err := c.current().KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return k, err
	}
	now := c.now()
	c.mu.Lock()
	if until, ok := c.negative[kid]; ok && now.Before(until) {
		c.mu.Unlock()
		return jwkset.JWK{}, err
	}
	if now.Sub(c.lastUnknown) < c.unknownEvery {
		c.mu.Unlock()
		return jwkset.JWK{}, err // not negative-cached: a later token may refresh
	}
	c.lastUnknown = now
	c.mu.Unlock()
	if rerr := c.refresh(ctx); rerr != nil {
		c.log.Error("idem proxy: refreshing the JWKS for an unknown key id failed", "jwks", c.url, "err", rerr)
		return jwkset.JWK{}, err
	}
	k, err = c.current().KeyRead(ctx, kid)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		c.mu.Lock()
		c.forgetExpired(now)
		if len(c.negative) < jwksMaxNegative {
			c.negative[kid] = now.Add(c.negativeFor)
		}
		c.mu.Unlock()
	}
	return k, err
}

// forgetExpired drops negative entries that have expired; c.mu is held.
func (c *jwksCache) forgetExpired(now time.Time) {
	if len(c.negative) < jwksMaxNegative/2 {
		return
	}
	for kid, until := range c.negative {
		if !now.Before(until) {
			delete(c.negative, kid)
		}
	}
}

// The rest of jwkset.Storage reads the current set. The proxy only reads.

// KeyDelete deletes from the current set.
func (c *jwksCache) KeyDelete(ctx context.Context, kid string) (bool, error) {
	return c.current().KeyDelete(ctx, kid)
}

// KeyReadAll reads the current set.
func (c *jwksCache) KeyReadAll(ctx context.Context) ([]jwkset.JWK, error) {
	return c.current().KeyReadAll(ctx)
}

// KeyReplaceAll replaces the current set's keys.
func (c *jwksCache) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	return c.current().KeyReplaceAll(ctx, given)
}

// KeyWrite writes to the current set.
func (c *jwksCache) KeyWrite(ctx context.Context, jwk jwkset.JWK) error {
	return c.current().KeyWrite(ctx, jwk)
}

// JSON renders the current set.
func (c *jwksCache) JSON(ctx context.Context) (json.RawMessage, error) { return c.current().JSON(ctx) }

// JSONPublic renders the current set's public keys.
func (c *jwksCache) JSONPublic(ctx context.Context) (json.RawMessage, error) {
	return c.current().JSONPublic(ctx)
}

// JSONPrivate renders the current set with private material.
func (c *jwksCache) JSONPrivate(ctx context.Context) (json.RawMessage, error) {
	return c.current().JSONPrivate(ctx)
}

// JSONWithOptions renders the current set with options.
func (c *jwksCache) JSONWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (json.RawMessage, error) {
	return c.current().JSONWithOptions(ctx, m, v)
}

// Marshal returns the current set for marshalling.
func (c *jwksCache) Marshal(ctx context.Context) (jwkset.JWKSMarshal, error) {
	return c.current().Marshal(ctx)
}

// MarshalWithOptions returns the current set for marshalling, with options.
func (c *jwksCache) MarshalWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (jwkset.JWKSMarshal, error) {
	return c.current().MarshalWithOptions(ctx, m, v)
}
