package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/idemkit/idem"
)

// Sides of a cell.
const (
	sideRaw       = "raw"
	sideIdem      = "idem"       // engine, replay cache off: every request reaches the store
	sideIdemCache = "idem+cache" // engine with its defaults, replay cache on
)

// replayKeys is how many recorded keys the replay and mixed scenarios
// cycle through.
const replayKeys = 1000

// stormDup is how many consecutive requests of the storm share one key.
const stormDup = 16

// sidesOf lists the sides a scenario runs, raw first. The first-time,
// replay and mixed scenarios also run the engine with its replay cache (on
// by default): what it saves replays, and what filling it costs
// first-time requests.
func sidesOf(scenario string) []string {
	switch scenario {
	case ScenarioFirst, ScenarioReplay, ScenarioMixed:
		return []string{sideRaw, sideIdem, sideIdemCache}
	}
	return []string{sideRaw, sideIdem}
}

// workload holds what the cells of one run share.
type workload struct {
	raw      rawStore
	eng      *idem.Engine // replay cache off
	cacheEng *idem.Engine // replay cache as by default (on)
	payload  []byte
	prepOnce sync.Once
	prepErr  error
	// prefilled is how many prefilled records each side holds; replays
	// read those instead of the replayKeys recorded by prepare.
	prefilled int64
	// meter, when set, reads what each side's slices cost the server.
	meter meter
}

// replayKeyOf is the key request n of a replay cell reads.
func (w *workload) replayKeyOf(n int64) string {
	if w.prefilled > 0 {
		return prefillReplayKey(n, w.prefilled)
	}
	return replayKey(n)
}

var errEffectOnReplay = errors.New("a replay ran the effect")

func (w *workload) handler(context.Context, *idem.Attempt) ([]byte, error) { return w.payload, nil }

func (w *workload) do(ctx context.Context, e *idem.Engine, key string) (outcome, error) {
	r, err := e.DoBytes(ctx, idem.Request{Scope: benchScope, Key: idem.Key(key),
		Fingerprint: idem.Fingerprint(benchFingerprint), Operation: "bench"}, w.handler)
	switch {
	case errors.Is(err, idem.ErrInFlight):
		return outConflict, nil
	case err != nil:
		return 0, err
	case r.Replayed:
		return outReplay, nil
	}
	return outFirst, nil
}

func (w *workload) rawFirst(ctx context.Context, key string) (outcome, error) {
	ok, err := w.raw.insert(ctx, key)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("raw: key %q already present", key)
	}
	return outFirst, w.raw.update(ctx, key, w.payload)
}

func (w *workload) rawClaimOrRead(ctx context.Context, key string) (outcome, error) {
	ok, err := w.raw.insert(ctx, key)
	if err != nil {
		return 0, err
	}
	if ok {
		return outFirst, w.raw.update(ctx, key, w.payload)
	}
	_, err = w.raw.read(ctx, key)
	return outReplay, err
}

// rawReadOrClaim is an idempotent request on the raw driver that, like
// idem, cannot know whether its key is new: it reads the key first (the
// cheaper order while most requests are replays, the order idem's stores
// take then, see storekit/claimmix), and only on a miss inserts and
// records — or, when a concurrent inserter won, reads again.
func (w *workload) rawReadOrClaim(ctx context.Context, key string) (outcome, error) {
	found, err := w.raw.read(ctx, key)
	if err != nil || found {
		return outReplay, err
	}
	return w.rawClaimOrRead(ctx, key)
}

func replayKey(n int64) string { return "r-" + strconv.FormatInt(n%replayKeys, 10) }

// prepare records the replay keys on both sides, once per run.
func (w *workload) prepare(ctx context.Context) error {
	w.prepOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < replayKeys && errs[g] == nil; i += 16 {
					k := replayKey(int64(i))
					if _, errs[g] = w.rawFirst(ctx, k); errs[g] == nil {
						_, errs[g] = w.do(ctx, w.eng, k)
					}
				}
			}()
		}
		wg.Wait()
		w.prepErr = errors.Join(errs...)
	})
	return w.prepErr
}

// opFor returns the request function of one cell. prefix makes the keys of
// first-time requests unique to the cell.
func (w *workload) opFor(scenario, side, prefix string) op {
	eng := w.eng
	if side == sideIdemCache {
		eng = w.cacheEng
	}
	raw := side == sideRaw
	switch scenario {
	case ScenarioFirst:
		return func(ctx context.Context, n int64) (outcome, error) {
			k := prefix + strconv.FormatInt(n, 10)
			if raw {
				return w.rawFirst(ctx, k)
			}
			out, err := w.do(ctx, eng, k)
			if err == nil && out != outFirst {
				err = fmt.Errorf("first-time key %q was not first", k)
			}
			return out, err
		}
	case ScenarioReplay:
		return func(ctx context.Context, n int64) (outcome, error) {
			if raw {
				_, err := w.raw.read(ctx, w.replayKeyOf(n))
				return outReplay, err
			}
			out, err := w.do(ctx, eng, w.replayKeyOf(n))
			if err == nil && out != outReplay {
				err = errEffectOnReplay
			}
			return out, err
		}
	case ScenarioStorm:
		return func(ctx context.Context, n int64) (outcome, error) {
			k := prefix + strconv.FormatInt(n/stormDup, 10)
			if raw {
				return w.rawClaimOrRead(ctx, k)
			}
			return w.do(ctx, eng, k)
		}
	default: // mixed: 10% first-time, 90% replays
		first, replay := w.opFor(ScenarioFirst, side, prefix), w.opFor(ScenarioReplay, side, prefix)
		if raw {
			// Neither side knows which requests are first-time: the raw
			// side reads first (rawReadOrClaim), as idem's stores do in
			// this mix. Giving it INSERT + UPDATE for exactly the new
			// keys and a lone SELECT for the others would measure idem
			// against a driver that knows the answer before asking: one
			// round trip fewer per first-time request than any
			// idempotent request can make (docs/performance.md).
			return func(ctx context.Context, n int64) (outcome, error) {
				k := w.replayKeyOf(n)
				if n%10 == 0 {
					k = prefix + strconv.FormatInt(n, 10)
				}
				out, err := w.rawReadOrClaim(ctx, k)
				if err == nil && (out == outFirst) != (n%10 == 0) {
					err = fmt.Errorf("raw: key %q: unexpected outcome", k)
				}
				return out, err
			}
		}
		return func(ctx context.Context, n int64) (outcome, error) {
			if n%10 == 0 {
				return first(ctx, n)
			}
			return replay(ctx, n)
		}
	}
}
