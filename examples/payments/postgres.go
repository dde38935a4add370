package main

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
)

func openPostgres(context.Context, string) (idem.Store, error) {
	return nil, errors.New("postgres store not available in this build")
}
