package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// ErrNoTimeLeft is matched (errors.Is) when an invocation has less time
// before its deadline than Config.DeadlineMargin: nothing was claimed,
// and a retry runs the request.
var ErrNoTimeLeft = errors.New("idemlambda: not enough time left before the Lambda deadline to run and record the effect")

// bound returns pol with its Timeout cut to what ctx's deadline (the
// Lambda's remaining time) leaves after margin: the effect is cut there,
// and ends unknown, while the function can still record it. A context
// without a deadline leaves pol as it is.
// def is the engine's EffectTimeout, which a zero pol.Timeout stands for.
func bound(ctx context.Context, pol idem.Policy, def, margin time.Duration, now time.Time) (idem.Policy, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return pol, nil
	}
	left := dl.Sub(now) - margin
	if left <= 0 {
		return pol, fmt.Errorf("%w (%s left, margin %s)", ErrNoTimeLeft, dl.Sub(now).Round(time.Millisecond), margin)
	}
	if pol.Timeout == 0 {
		pol.Timeout = def
	}
	if pol.Timeout <= 0 || pol.Timeout > left {
		pol.Timeout = left
	}
	return pol, nil
}
