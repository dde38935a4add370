package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Spool keeps outcomes that idem knows but could not write to the store:
// the effect ran, its result is in hand, and the store stayed unreachable
// for the whole FinishTimeout. Rather than leave the record in_progress (it
// would become unknown after its lease, and every retry would get 409
// until an operator decided it), the engine appends the outcome to the
// spool — one file per outcome in a directory, fsync'd before the caller
// is answered — and re-applies it, fenced, once the store answers. A
// restarted process that opens the same directory re-applies what is left.
//
// Re-applying is an ordinary fenced Finish (or Release) with the claim's
// fence and attempt id: if the record moved on meanwhile (an operator or
// reconciliation resolved it, which bumps the fence), the store refuses and
// the spooled outcome is dropped, logged, never forced over the record.
//
// While an outcome is spooled, a duplicate reaching the engine that holds
// the spool is answered from it (with the fingerprint check), so a retry
// gets the outcome even before the store is back.
//
// A Spool is safe for concurrent use, and several processes may open one
// directory (re-applying an outcome twice is harmless: the store accepts a
// repeated identical outcome). Files are created 0600 in a 0700 directory:
// they hold recorded responses.
type Spool struct {
	dir string

	mu      sync.Mutex
	entries map[spoolIndex]*SpooledOutcome
	n       atomic.Int64 // len(entries), read without the lock on the hot path
	bad     []string     // files that could not be read, kept as evidence
}

type spoolIndex struct{ scope, key string }

// SpooledOutcome is one outcome waiting in a [Spool] to be written to the
// store.
type SpooledOutcome struct {
	Scope       string      `json:"scope"`
	Key         string      `json:"key"`
	Fingerprint Fingerprint `json:"fingerprint"`
	// Fence and AttemptID are the claim's: the outcome is applied only
	// while the record still carries them.
	Fence     int64  `json:"fence"`
	AttemptID string `json:"attempt_id"`
	// Release is true for a released attempt (no effect happened): the
	// claim is deleted instead of an outcome recorded.
	Release bool `json:"release,omitempty"`
	// State is StateSucceeded or StateFailed when Release is false.
	State  State  `json:"state,omitempty"`
	Result []byte `json:"result,omitempty"`
	// CompletedAt is when the outcome was known (engine clock); ExpiresAt
	// is CompletedAt + TTL, as if it had been recorded then.
	CompletedAt time.Time `json:"completed_at"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	// SpooledAt is when it was written to the spool; Cause is the store
	// error that made it necessary.
	SpooledAt time.Time `json:"spooled_at"`
	Cause     string    `json:"cause,omitempty"`
}

// record is the outcome as the record it stands for.
func (o *SpooledOutcome) record() Record {
	return Record{Scope: o.Scope, Key: o.Key, Fingerprint: o.Fingerprint, State: o.State,
		Fence: o.Fence, AttemptID: o.AttemptID, Result: o.Result,
		CompletedAt: o.CompletedAt, ExpiresAt: o.ExpiresAt}
}

// ErrSpoolUnreadable is wrapped by [OpenSpool]'s and [ReadSpool]'s
// report of spool files that could not be decoded; they are left in place.
var ErrSpoolUnreadable = errors.New("idem: spool file unreadable")

const spoolSuffix = ".outcome.json"

// OpenSpool opens (creating it if needed) the spool directory dir and
// loads the outcomes it holds. A file that cannot be decoded is left in
// place and listed by [Spool.Unreadable]; it does not stop the others.
func OpenSpool(dir string) (*Spool, error) {
	if dir == "" {
		return nil, errors.New("idem: OpenSpool: empty directory name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("idem: spool: %w", err)
	}
	s := &Spool{dir: dir, entries: make(map[spoolIndex]*SpooledOutcome)}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// ReadSpool lists the outcomes held in the spool directory dir without
// creating it: for tools that report on a spool a running process owns. A
// missing directory holds nothing.
func ReadSpool(dir string) (outcomes []SpooledOutcome, unreadable []string, err error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	s := &Spool{dir: dir, entries: make(map[spoolIndex]*SpooledOutcome)}
	if err := s.load(); err != nil {
		return nil, nil, err
	}
	return s.Pending(), s.Unreadable(), nil
}

func (s *Spool) load() error {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("idem: spool: %w", err)
	}
	for _, de := range names {
		name := de.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(s.dir, name)) // a write that never completed
			continue
		}
		if !strings.HasSuffix(name, spoolSuffix) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		var o SpooledOutcome
		if err == nil {
			err = json.Unmarshal(b, &o)
		}
		if err != nil || o.Key == "" || o.Fence == 0 {
			s.bad = append(s.bad, name)
			continue
		}
		s.putLocked(&o)
	}
	return nil
}

// Dir returns the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// Len returns how many outcomes wait to be applied.
func (s *Spool) Len() int { return int(s.n.Load()) }

// Pending returns the outcomes waiting to be applied, oldest first.
func (s *Spool) Pending() []SpooledOutcome {
	s.mu.Lock()
	out := make([]SpooledOutcome, 0, len(s.entries))
	for _, o := range s.entries {
		out = append(out, *o)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].SpooledAt.Before(out[j].SpooledAt) })
	return out
}

// Unreadable returns the names of spool files that could not be decoded.
// They are kept for an operator to look at; an outcome in one is not
// applied.
func (s *Spool) Unreadable() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// lookup returns the spooled outcome for (scope, key), if any.
func (s *Spool) lookup(scope, key string) (SpooledOutcome, bool) {
	if s == nil || s.n.Load() == 0 {
		return SpooledOutcome{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.entries[spoolIndex{scope, key}]
	if !ok {
		return SpooledOutcome{}, false
	}
	return *o, true
}

// add writes o durably (temporary file, fsync, rename, fsync of the
// directory) and indexes it.
func (s *Spool) add(o *SpooledOutcome) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("idem: spool: %w", err)
	}
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("idem: spool: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, spoolFileName(o)))
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("idem: spool: %w", err)
	}
	s.mu.Lock()
	s.putLocked(o)
	s.mu.Unlock()
	return nil
}

func (s *Spool) putLocked(o *SpooledOutcome) {
	k := spoolIndex{o.Scope, o.Key}
	if old, ok := s.entries[k]; ok && old.Fence > o.Fence {
		return // a later claim's outcome is already held
	}
	if _, ok := s.entries[k]; !ok {
		s.n.Add(1)
	}
	s.entries[k] = o
}

// remove deletes o's file and index entry (unless a newer outcome for the
// same key replaced it).
func (s *Spool) remove(o *SpooledOutcome) error {
	err := os.Remove(filepath.Join(s.dir, spoolFileName(o)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("idem: spool: %w", err)
	}
	s.mu.Lock()
	k := spoolIndex{o.Scope, o.Key}
	if cur, ok := s.entries[k]; ok && cur.Fence == o.Fence && cur.AttemptID == o.AttemptID {
		delete(s.entries, k)
		s.n.Add(-1)
	}
	s.mu.Unlock()
	return nil
}

// spoolFileName names o's file after a hash of scope and key (which may
// hold any byte) and the fence.
func spoolFileName(o *SpooledOutcome) string {
	h := sha256.Sum256([]byte(o.Scope + "\x00" + o.Key))
	return hex.EncodeToString(h[:12]) + "-" + strconv.FormatInt(o.Fence, 10) + spoolSuffix
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// spoolOutcome writes to the spool an outcome whose store write failed with
// cause after FinishTimeout. It returns the record the outcome stands for
// and true when the outcome is now durable in the spool; false when there
// is no spool or writing to it failed too (then the record becomes unknown
// after its lease, as without a spool).
func (e *Engine) spoolOutcome(rec Record, st State, val []byte, now time.Time, release bool, cause error) (*Record, bool) {
	sp := e.cfg.Spool
	if sp == nil || e.txBound {
		return nil, false
	}
	o := &SpooledOutcome{Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint, Fence: rec.Fence,
		AttemptID: rec.AttemptID, Release: release, CompletedAt: now, SpooledAt: time.Now().UTC(), Cause: cause.Error()}
	if !release {
		o.State, o.Result, o.ExpiresAt = st, val, now.Add(e.cfg.TTL)
	}
	log := e.cfg.Logger.With("key_hash", hashForLog(rec.Scope, rec.Key), "fence", rec.Fence)
	if err := sp.add(o); err != nil {
		log.Error("idem: outcome not recorded and could not be spooled; the record becomes unknown after its lease", "store_err", cause, "spool_err", err)
		return nil, false
	}
	log.Warn("idem: store unreachable; outcome spooled, to be applied when it answers", "spool", sp.Dir(), "err", cause)
	if e.observe {
		e.cfg.Observer.Observe(context.Background(), Event{Kind: EventSpool, Delta: 1, Scope: rec.Scope, Key: rec.Key})
	}
	r := o.record()
	return &r, true
}

// spoolLoop re-applies spooled outcomes at once and then every
// SpoolInterval, until ctx ends (Close).
func (e *Engine) spoolLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if n := e.cfg.Spool.Len(); n > 0 && e.observe {
		e.cfg.Observer.Observe(ctx, Event{Kind: EventSpool, Delta: n})
	}
	t := time.NewTicker(e.cfg.SpoolInterval)
	defer t.Stop()
	for {
		if e.cfg.Spool.Len() > 0 {
			if _, err := e.ApplySpool(ctx); err != nil && ctx.Err() == nil {
				e.cfg.Logger.Debug("idem: spooled outcomes not applied yet", "pending", e.cfg.Spool.Len(), "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ApplySpool writes the spooled outcomes to the store now, oldest first,
// each fenced by its claim: an outcome whose record moved on (resolved,
// re-claimed, or gone) is dropped, never forced. It stops at the first
// store failure (the store is still down; the next round tries again) and
// returns how many outcomes left the spool. The engine calls it every
// [Config.SpoolInterval]; calling it directly is for tools and tests.
func (e *Engine) ApplySpool(ctx context.Context) (int, error) {
	sp := e.cfg.Spool
	if sp == nil {
		return 0, nil
	}
	n := 0
	for _, o := range sp.Pending() {
		actx, cancel := context.WithTimeout(ctx, e.cfg.FinishTimeout)
		err := e.applySpooled(actx, &o)
		cancel()
		log := e.cfg.Logger.With("key_hash", hashForLog(o.Scope, o.Key), "fence", o.Fence)
		switch {
		case err == nil:
			log.Info("idem: spooled outcome applied", "state", o.State, "release", o.Release)
		case errors.Is(err, ErrFenced), errors.Is(err, ErrNotFound):
			log.Warn("idem: spooled outcome dropped: the record moved on (resolved, re-claimed or removed) before it could be applied", "err", err)
		default:
			return n, err
		}
		if rerr := sp.remove(&o); rerr != nil {
			return n, rerr
		}
		n++
		e.flights.poke(o.Scope, o.Key)
		if e.observe {
			e.cfg.Observer.Observe(ctx, Event{Kind: EventSpool, Delta: -1, Scope: o.Scope, Key: o.Key})
		}
	}
	return n, nil
}

// applySpooled is the fenced write of one spooled outcome.
func (e *Engine) applySpooled(ctx context.Context, o *SpooledOutcome) error {
	if o.Release {
		return e.retry(ctx, "release", func() error {
			return e.store.Release(ctx, ReleaseParams{Scope: o.Scope, Key: o.Key, Fence: o.Fence, AttemptID: o.AttemptID})
		})
	}
	return e.retry(ctx, "finish", func() error {
		_, err := e.store.Finish(ctx, FinishParams{Scope: o.Scope, Key: o.Key, Fence: o.Fence, AttemptID: o.AttemptID,
			State: o.State, Result: o.Result, CompletedAt: o.CompletedAt, ExpiresAt: o.ExpiresAt})
		return err
	})
}
