package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// SweeperConfig configures a [Sweeper].
type SweeperConfig struct {
	// Interval between sweeps. Defaults to 1m.
	Interval time.Duration
	// BatchSize bounds each delete. Defaults to 1000.
	BatchSize int
	// Clock returns the time expiry is judged at. Defaults to the store's
	// clock when it has one ([StoreClock]; read once per RunOnce, which
	// fails when the store cannot tell the time), else time.Now. An
	// engine's Now is also a good choice.
	Clock func() time.Time
	// Logger receives one line per sweep that deleted something. Defaults
	// to discarding logs.
	Logger *slog.Logger
	// OnSweep, when set, is called after each RunOnce with the number of
	// records deleted (a test signal instead of sleeps).
	OnSweep func(deleted int, err error)
	// OnBatch, when set, is called after each batch of a RunOnce with the
	// number of records it has deleted so far (the CLI prints progress
	// from it on long sweeps). Defaults to none.
	OnBatch func(deletedSoFar int)
	// MaxRate, when positive, caps how fast a RunOnce deletes, in records
	// per second: after each batch it waits until the run's average is
	// back at or under MaxRate, so a backlog of millions of expired
	// records is cleared in steady batches beside live traffic rather than
	// as fast as the store allows. Defaults to 0, no cap.
	MaxRate float64
}

// Sweeper deletes expired succeeded and failed records in bounded batches.
// It never touches in_progress or unknown records: the store's Sweep decides
// that in the delete itself.
type Sweeper struct {
	store Store
	cfg   SweeperConfig
	// storeClock, when set, is the store's clock, read by each RunOnce
	// since Config.Clock was left to its default.
	storeClock StoreClock

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSweeper returns a sweeper over store.
func NewSweeper(store Store, cfg SweeperConfig) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	var sc StoreClock
	if cfg.Clock == nil {
		cfg.Clock = time.Now
		sc, _ = store.(StoreClock)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Sweeper{store: store, cfg: cfg, storeClock: sc}
}

// RunOnce sweeps in batches until a batch deletes fewer than BatchSize
// records, and returns the total deleted. With MaxRate it paces the
// batches (see SweeperConfig.MaxRate).
func (s *Sweeper) RunOnce(ctx context.Context) (int, error) {
	total, start := 0, time.Now()
	now := s.cfg.Clock()
	if s.storeClock != nil {
		var err error
		if now, err = s.storeClock.StoreTime(ctx); err != nil {
			return 0, fmt.Errorf("idem: sweep: reading the store's clock: %w", err)
		}
	}
	now = now.UTC().Truncate(time.Microsecond)
	for {
		n, err := s.store.Sweep(ctx, SweepParams{Now: now, Limit: s.cfg.BatchSize})
		total += n
		if err != nil {
			return total, err
		}
		if s.cfg.OnBatch != nil {
			s.cfg.OnBatch(total)
		}
		if n < s.cfg.BatchSize {
			return total, nil
		}
		if err := s.pace(ctx, start, total); err != nil {
			return total, err
		}
	}
}

// pace waits, under MaxRate, until total deletions since start are at or
// under the rate; ctx ending stops the wait (and the run) with its error.
func (s *Sweeper) pace(ctx context.Context, start time.Time, total int) error {
	if s.cfg.MaxRate <= 0 {
		return nil
	}
	wait := time.Duration(float64(total)/s.cfg.MaxRate*float64(time.Second)) - time.Since(start)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Start runs RunOnce every Interval until Stop or ctx ends. Starting a
// running sweeper is an error.
func (s *Sweeper) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("idem: sweeper already started")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		for {
			n, err := s.RunOnce(ctx)
			if n > 0 || err != nil {
				s.cfg.Logger.Info("idem: sweep", "deleted", n, "err", err)
			}
			if s.cfg.OnSweep != nil {
				s.cfg.OnSweep(n, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop stops a started sweeper and waits for it to finish.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
