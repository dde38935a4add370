package idemtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// OpCase describes the request [Op] runs and how effects are counted.
type OpCase struct {
	// Request is the request every check sends; its Key is replaced by a
	// fresh key per check. Its Fingerprint must identify the request
	// (idem.FingerprintBody or idem.NewFingerprint of its inputs).
	Request idem.Request
	// Changed is the fingerprint of another request, for the divergence
	// check. Defaults to one derived from Request.Fingerprint.
	Changed idem.Fingerprint
	// Effects returns how many effects op has made so far. Defaults to a
	// spy counting the calls of op.
	Effects func() int
	// Concurrency is how many identical calls the concurrency check makes
	// at once. Defaults to [DefaultConcurrency].
	Concurrency int
	// Checks lists the checks to run. Defaults to [AllChecks].
	Checks []Check
}

// callTimeout bounds one engine call made by a check.
const callTimeout = 30 * time.Second

// Op runs the checks against op run by e. The checks that need faults or a
// fake clock run op through engines of their own, over e's store wrapped in
// fault injectors and with e's configuration (Clock and Observer replaced).
func Op(t testing.TB, e *idem.Engine, op idem.Handler, c OpCase) {
	t.Helper()
	n := c.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	if c.Changed.IsZero() {
		c.Changed = idem.NewFingerprint(c.Request.Fingerprint[:], []byte("idemtest: changed"))
	}
	checks := checksOf(c.Checks)
	if c.Request.Fingerprint.IsZero() && slices.Contains(checks, Divergence) {
		t.Errorf("idemtest: %s: Request.Fingerprint is zero, so every request with a key replays the first one whatever it asks\nfix: set Request.Fingerprint from the request's inputs (idem.FingerprintBody, idem.NewFingerprint)", Divergence)
		checks = slices.DeleteFunc(slices.Clone(checks), func(x Check) bool { return x == Divergence })
	}
	tg := &opTarget{e: e, c: c, calls: new(atomic.Int64)}
	tg.op = func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		tg.calls.Add(1)
		return op(ctx, a)
	}
	r := &runner{t: t, tg: tg, n: n, checks: checks}
	r.run()
}

// opTarget drives an operation through an engine.
type opTarget struct {
	e     *idem.Engine
	c     OpCase
	op    idem.Handler
	calls *atomic.Int64
}

func (o *opTarget) send(key string, v variant) answer {
	req := o.c.Request
	req.Key = idem.Key(key)
	if v == changed {
		req.Fingerprint = o.c.Changed
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := o.e.DoBytes(ctx, req, o.op)
	return &opAnswer{res: res, err: err}
}

func (o *opTarget) describe(key string, v variant) string {
	fp := o.c.Request.Fingerprint
	if v == changed {
		fp = o.c.Changed
	}
	return fmt.Sprintf("operation %q with key %q, scope %q and fingerprint %.12s…", o.c.Request.Operation, key, o.c.Request.Scope, fp)
}

func (o *opTarget) effects() (int, bool) {
	if o.c.Effects != nil {
		return o.c.Effects(), true
	}
	return int(o.calls.Load()), true
}

func (o *opTarget) canReorder() bool { return false }
func (o *opTarget) deep() bool       { return true }

func (o *opTarget) rebuild(st idem.Store, cfg idem.Config) (target, func(), error) {
	e, err := idem.New(st, cfg)
	if err != nil {
		return nil, nil, err
	}
	return &opTarget{e: e, c: o.c, op: o.op, calls: o.calls}, func() { _ = e.Close() }, nil
}

func (o *opTarget) baseConfig() idem.Config { return o.e.Config() }

// newStore is the engine's own store: the user's store, which idemtest
// does not close.
func (o *opTarget) newStore() (idem.Store, func()) { return o.e.Store(), func() {} }

func (o *opTarget) fix(c Check) string {
	switch c {
	case Replay:
		return "return the effect's result from op and keep the key stable across retries (idem.DeriveKey from the intent's identity, never a uuid per attempt)"
	case Divergence:
		return "set Request.Fingerprint from every input that changes what the effect does"
	case Concurrency:
		return "run the effect only inside op, under the engine's claim; do not start it before DoBytes"
	case Crash:
		return "do not declare Policy.Redrivable unless the provider deduplicates by Attempt.ForwardKey; return idem.Unknown(err) when the effect may have happened"
	case LostAnswers:
		return "keep Config.StoreRetries above 0 so a claim whose answer was lost is recognised by its attempt id"
	case Retention:
		return "set Config.TTL to cover the longest retry window (Config.Cover)"
	case Observability:
		return "keep Config.Observer set (idem.Observers to fan out)"
	}
	return ""
}

// opAnswer is what DoBytes returned.
type opAnswer struct {
	res idem.Result
	err error
}

func (a *opAnswer) ok() bool       { return a.err == nil }
func (a *opAnswer) mismatch() bool { return errors.Is(a.err, idem.ErrMismatch) }
func (a *opAnswer) inFlight() bool { return errors.Is(a.err, idem.ErrInFlight) }
func (a *opAnswer) unknown() bool  { return errors.Is(a.err, idem.ErrUnknownOutcome) }

func (a *opAnswer) same(o answer) bool {
	b, ok := o.(*opAnswer)
	return ok && a.err == nil && b.err == nil && a.res.State == b.res.State && bytes.Equal(a.res.Value, b.res.Value)
}

func (a *opAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("error %q", a.err)
	}
	return fmt.Sprintf("%s value %s (replayed %v)", a.res.State, clip(a.res.Value), a.res.Replayed)
}
