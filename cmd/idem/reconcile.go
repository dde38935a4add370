package main

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/reconcile"
)

// cmdReconcile compares the store's records with a provider's view:
// `idem reconcile --store DSN (--provider-csv FILE | --provider-url TEMPLATE)`.
// Exit 0 when clean, 3 when drift or over-counts were found.
func cmdReconcile(ctx context.Context, e *env, args []string) int {
	return reconcile.RunReconcileCommand(ctx, args, e.stdout, e.stderr, func(ctx context.Context, dsn string) (idem.Store, error) {
		d, err := storeopen.Parse(dsn)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", reconcile.ErrUsage, err)
		}
		if d.Scheme == "memory" {
			// A fresh memory store is empty: the run would report clean
			// without having looked at any record.
			return nil, fmt.Errorf("%w: memory:// starts empty in every process; give the store the application writes to", reconcile.ErrUsage)
		}
		return storeopen.Open(ctx, dsn, storeopen.Options{MustExist: true})
	})
}
