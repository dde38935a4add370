package memstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return memstore.New() },
		// One process's memory is shared by every engine in it.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store { return nopCloser{st} },
	})
}

// nopCloser lets the suite close the peer without closing the shared store.
type nopCloser struct{ idem.Store }

func (nopCloser) Close() error { return nil }

// Subscribe passes notifications through from the shared store.
func (n nopCloser) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	return n.Store.(idem.Notifier).Subscribe(ctx, scope, key)
}
