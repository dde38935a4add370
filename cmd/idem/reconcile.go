package main

import (
	"context"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/storeopen"
	"github.com/idemkit/idem/reconcile"
)

// cmdReconcile compares the store's records with a provider's view:
// `idem reconcile --store DSN (--provider-csv FILE | --provider-url TEMPLATE)`.
// Exit 0 when clean, 3 when drift or over-counts were found.
func cmdReconcile(ctx context.Context, e *env, args []string) int {
	return reconcile.RunReconcileCommand(ctx, args, e.stdout, e.stderr, func(ctx context.Context, dsn string) (idem.Store, error) {
		return storeopen.Open(ctx, dsn, storeopen.Options{MustExist: true})
	})
}
