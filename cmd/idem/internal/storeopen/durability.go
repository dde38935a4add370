package storeopen

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// The optional store interfaces pass through the wrapper that closes the
// CLI's own Redis client, so that the engine checks the store's durability
// and decides on its clock exactly as it does on the store itself.
var (
	_ idem.DurabilityChecker  = (*closeBoth)(nil)
	_ idem.ReplicationChecker = (*closeBoth)(nil)
	_ idem.StoreClock         = (*closeBoth)(nil)
)

// CheckDurability asks the wrapped store, when it can tell.
func (c *closeBoth) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if d, ok := c.Store.(idem.DurabilityChecker); ok {
		return d.CheckDurability(ctx)
	}
	return nil, nil
}

// CheckReplication asks the wrapped store, when it can tell.
func (c *closeBoth) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if r, ok := c.Store.(idem.ReplicationChecker); ok {
		return r.CheckReplication(ctx)
	}
	return idem.Replication{}, nil
}

// StoreTime reads the wrapped store's clock.
func (c *closeBoth) StoreTime(ctx context.Context) (time.Time, error) {
	if sc, ok := c.Store.(idem.StoreClock); ok {
		return sc.StoreTime(ctx)
	}
	return time.Time{}, errors.New("storeopen: store has no clock")
}
