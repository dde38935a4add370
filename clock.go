package idem

import (
	"context"
	"sync/atomic"
	"time"
)

// StoreClock is implemented by stores whose backend has a clock that every
// engine on it reads (PostgreSQL clock_timestamp(), MySQL NOW(6), Redis
// TIME). Process-local stores (memory, SQLite) have none: every engine on
// them shares the host's clock already.
//
// One clock decides leases and expiry. Engines on hosts whose clocks
// disagree would otherwise disagree on time: one whose clock runs ahead by
// more than the lease marks another's live record unknown, and one whose
// clock runs behind by more than the TTL writes records that the others
// find already expired, and run again. So the engine measures the offset
// between its Clock and the store's clock at New and every
// Config.ClockSync, and decides every lease and expiry at Clock plus that
// offset.
type StoreClock interface {
	// StoreTime returns the backend's current time, read in one round trip.
	StoreTime(ctx context.Context) (time.Time, error)
}

// clockSamples is how many round trips one measurement of the offset takes;
// the one with the shortest round trip wins, as its midpoint is the best
// estimate of when the store read its clock.
const clockSamples = 3

// clockSync holds the engine's offset to the store's clock. It is shared by
// the engines WithStore derives, so they decide time alike.
type clockSync struct {
	// offset, in nanoseconds, is added to Config.Clock for every lease and
	// expiry decision. The hot path reads it with one atomic load.
	offset atomic.Int64
	// stop ends the re-measuring loop; done is closed when it has.
	stop context.CancelFunc
	done chan struct{}
}

// Now returns the engine's time: Config.Clock plus the measured offset to
// the store's clock (see [StoreClock]), truncated to the microsecond. Leases
// and expiry are decided at it; give it to a [Sweeper] or a reconciler on
// the same store so they judge expiry the same way.
func (e *Engine) Now() time.Time { return e.now() }

// ClockOffset returns the offset last measured between Config.Clock and the
// store's clock (store minus engine); zero for a store without a clock.
func (e *Engine) ClockOffset() time.Duration { return time.Duration(e.sync.offset.Load()) }

// MeasureClockOffset measures the offset of clock to the store's clock:
// the store's time minus clock's time at the midpoint of the round trip
// with the shortest of a few, and that round trip. The idem doctor
// command reports it.
func MeasureClockOffset(ctx context.Context, sc StoreClock, clock func() time.Time) (offset, rtt time.Duration, err error) {
	rtt = -1
	for range clockSamples {
		start := time.Now() // monotonic: the round trip is measured on it
		before := clock()
		st, err := sc.StoreTime(ctx)
		if err != nil {
			return 0, 0, err
		}
		d := time.Since(start)
		if rtt < 0 || d < rtt {
			rtt = d
			offset = st.Sub(before.Add(d / 2))
		}
	}
	return offset, rtt, nil
}

// syncClock measures the offset to the store's clock and keeps it; when the
// store does not answer, the last offset stays. It logs an offset larger
// than a quarter of the lease: such a host clock alone would mark live
// records unknown.
func (e *Engine) syncClock(ctx context.Context, sc StoreClock) error {
	off, rtt, err := MeasureClockOffset(ctx, sc, e.cfg.Clock)
	if err != nil {
		e.cfg.Logger.Warn("idem: cannot read the store's clock; keeping the last offset", "offset", e.ClockOffset(), "err", err)
		return err
	}
	e.sync.offset.Store(int64(off))
	if off.Abs() > e.cfg.Lease/4 {
		e.cfg.Logger.Warn("idem: this host's clock is off the store's by more than a quarter of the lease; deciding leases and expiry on the store's clock",
			"offset", off, "lease", e.cfg.Lease, "round_trip", rtt)
	}
	if e.observe {
		e.cfg.Observer.Observe(ctx, Event{Kind: EventClockOffset, Duration: off})
	}
	return nil
}

// startClockSync measures the offset once, bounded by ctx, and starts the
// loop that re-measures it every Config.ClockSync until Close.
func (e *Engine) startClockSync(ctx context.Context) error {
	sc, ok := e.store.(StoreClock)
	if !ok || e.cfg.ClockSync < 0 {
		return nil
	}
	if err := e.syncClock(ctx, sc); err != nil {
		return err
	}
	lctx, stop := context.WithCancel(context.Background())
	e.sync.stop, e.sync.done = stop, make(chan struct{})
	go e.clockLoop(lctx, sc)
	return nil
}

func (e *Engine) clockLoop(ctx context.Context, sc StoreClock) {
	defer close(e.sync.done)
	t := time.NewTicker(e.cfg.ClockSync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mctx, cancel := context.WithTimeout(ctx, e.cfg.ClockSync/2)
		_ = e.syncClock(mctx, sc) // logged; the last offset stays
		cancel()
	}
}

// stopClockSync ends the loop started by startClockSync.
func (e *Engine) stopClockSync() {
	if e.sync.stop != nil {
		e.sync.stop()
		<-e.sync.done
	}
}
