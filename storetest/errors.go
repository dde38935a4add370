package storetest

import (
	"errors"

	"github.com/idemkit/idem"
)

func errorsIsInFlight(err error) bool { return errors.Is(err, idem.ErrInFlight) }
