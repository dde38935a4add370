package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// evictingStore stands for a Redis store on a server with
// maxmemory-policy allkeys-lru: its durability check says so.
type evictingStore struct{ *memstore.Store }

func (evictingStore) CheckDurability(context.Context) ([]idem.Finding, error) {
	return []idem.Finding{{
		Setting: "maxmemory-policy", Value: "allkeys-lru",
		Problem:  "Redis deletes keys at maxmemory, records included",
		Fix:      "CONFIG SET maxmemory-policy noeviction",
		Severity: idem.SeverityRefuse,
	}}, nil
}

// NewContext bounds the questions the engine asks the store at start-up
// (durability, clock); a store that can forget is refused with each
// setting and its fix.
func ExampleNewContext() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := idem.NewContext(ctx, evictingStore{memstore.New()}, idem.Config{})
	var verr *idem.VolatileStoreError
	if errors.As(err, &verr) {
		for _, f := range verr.Findings {
			fmt.Printf("refused: %s = %s; fix: %s\n", f.Setting, f.Value, f.Fix)
		}
	}
	// Output: refused: maxmemory-policy = allkeys-lru; fix: CONFIG SET maxmemory-policy noeviction
}

// Engine.Now is the time leases and expiry are decided at: the engine's
// clock plus its measured offset to the store's clock (zero for a store
// local to this host, like the memory store).
func ExampleEngine_Now() {
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	fmt.Println(e.ClockOffset(), time.Until(e.Now()).Abs() < time.Minute)
	// Output: 0s true
}
