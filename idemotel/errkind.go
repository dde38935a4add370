package idemotel

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
)

// errorKind names an error by the idem sentinel it matches, never by its
// text.
func errorKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{
		{idem.ErrInvalidKey, "invalid_key"},
		{idem.ErrMismatch, "mismatch"},
		{idem.ErrInFlight, "in_flight"},
		{idem.ErrUnknownOutcome, "unknown_outcome"},
		{idem.ErrFenced, "fenced"},
		{idem.ErrNotFound, "not_found"},
		{idem.ErrClosed, "closed"},
		{idem.ErrStoreUnavailable, "store_unavailable"},
		{idem.ErrRecordedFailure, "recorded_failure"},
		{idem.ErrReleased, "released"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "other"
}
