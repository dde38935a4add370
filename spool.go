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
	dir   string
	store string // the store this spool belongs to (OpenSpoolFor), or ""

	mu        sync.Mutex
	entries   map[spoolIndex]*SpooledOutcome
	abandoned map[string]*SpooledOutcome // abandoned claims, by attempt id
	n         atomic.Int64               // len(entries) + len(abandoned), read without the lock on the hot path
	bad       []string                   // files that could not be read, kept as evidence
	foreign   []string                   // files another store's engine spooled: never applied here
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
	// Store names the store the outcome belongs to (see [OpenSpoolFor]);
	// empty in a spool opened with [OpenSpool].
	Store string `json:"store,omitempty"`
	// Abandoned is true for a claim whose answer was lost while the store
	// was unreachable: no effect ran under it, and its Fence is not known
	// (0). Once the store answers, the claim — if it landed, even late (a
	// statement still queued on a connection) — is released, so the key
	// is free for the client's retry instead of turning unknown.
	Abandoned bool `json:"abandoned,omitempty"`
	// LeaseUntil is an abandoned claim's lease: until it passes on the
	// store's clock, a claim that has not landed yet still may, and is
	// looked for.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
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
	return OpenSpoolFor(dir, "")
}

// spoolOwnerFile names the file in a spool directory that says which store
// the spool belongs to.
const spoolOwnerFile = "STORE"

// ErrSpoolInUse is matched (errors.Is) by [OpenSpoolFor]'s refusal of a
// spool directory that belongs to another store. The error is a
// [*SpoolInUseError].
var ErrSpoolInUse = errors.New("idem: the spool directory belongs to another store")

// SpoolInUseError is OpenSpoolFor's refusal of a directory another store's
// engine spools to: applying its outcomes to this store would find no
// such records, call them gone and delete the other engine's outcomes.
type SpoolInUseError struct {
	Dir string
	// Owner is the store the directory belongs to; Store the one asked for.
	Owner, Store string
}

func (e *SpoolInUseError) Error() string {
	return fmt.Sprintf("idem: spool directory %s belongs to store %q, not to %q: give each store a spool directory of its own", e.Dir, e.Owner, e.Store)
}

// Is matches ErrSpoolInUse.
func (e *SpoolInUseError) Is(target error) bool { return target == ErrSpoolInUse }

// OpenSpoolFor opens the spool directory dir for the store named store
// (an identity that stays the same across restarts and differs between
// stores, such as a DSN without its password), as [OpenSpool] does, and
// binds the directory to it: the first open writes the name to the file
// STORE in the directory, and a later open for another store is refused
// with a [*SpoolInUseError] naming both. Every outcome spooled is marked
// with the store's name; one found marked with another name is never
// applied nor deleted here (see [Spool.Foreign]). An empty store is
// OpenSpool: no binding.
func OpenSpoolFor(dir, store string) (*Spool, error) {
	if dir == "" {
		return nil, errors.New("idem: OpenSpool: empty directory name")
	}
	if strings.ContainsAny(store, "\r\n") {
		return nil, errors.New("idem: OpenSpoolFor: the store's name has a line break")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("idem: spool: %w", err)
	}
	if store != "" {
		if err := bindSpool(dir, store); err != nil {
			return nil, err
		}
	}
	s := &Spool{dir: dir, store: store, entries: make(map[spoolIndex]*SpooledOutcome), abandoned: make(map[string]*SpooledOutcome)}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// bindSpool writes store to dir's owner file, or checks that it is there.
func bindSpool(dir, store string) error {
	path := filepath.Join(dir, spoolOwnerFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if owner := strings.TrimSpace(string(b)); owner != store {
			return &SpoolInUseError{Dir: dir, Owner: owner, Store: store}
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("idem: spool: %w", err)
	}
	// O_EXCL: of two engines binding an empty directory at once, one wins.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return bindSpool(dir, store)
	}
	if err != nil {
		return fmt.Errorf("idem: spool: %w", err)
	}
	_, err = f.WriteString(store + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("idem: spool: %w", err)
	}
	return nil
}

// ReadSpool lists the outcomes held in the spool directory dir without
// creating it: for tools that report on a spool a running process owns. A
// missing directory holds nothing.
func ReadSpool(dir string) (outcomes []SpooledOutcome, unreadable []string, err error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	s := &Spool{dir: dir, entries: make(map[spoolIndex]*SpooledOutcome), abandoned: make(map[string]*SpooledOutcome)}
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
		if err != nil || o.Key == "" || (o.Fence == 0) != o.Abandoned || (o.Abandoned && o.AttemptID == "") {
			s.bad = append(s.bad, name)
			continue
		}
		if s.store != "" && o.Store != s.store {
			// Another store's (or, unmarked, one from before the binding):
			// left for its own engine, never applied to this store.
			s.foreign = append(s.foreign, name)
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
	out := make([]SpooledOutcome, 0, len(s.entries)+len(s.abandoned))
	for _, o := range s.entries {
		out = append(out, *o)
	}
	for _, o := range s.abandoned {
		out = append(out, *o)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].SpooledAt.Before(out[j].SpooledAt) })
	return out
}

// Foreign returns the names of spool files in the directory that another
// store's engine spooled (see [OpenSpoolFor]): they are not applied nor
// deleted here.
func (s *Spool) Foreign() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.foreign...)
}

// Store returns the store the spool belongs to, or "" for a spool opened
// with [OpenSpool].
func (s *Spool) Store() string { return s.store }

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
	o.Store = s.store
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
	if o.Abandoned {
		if _, ok := s.abandoned[o.AttemptID]; !ok {
			s.n.Add(1)
		}
		s.abandoned[o.AttemptID] = o
		return
	}
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
	if o.Abandoned {
		if _, ok := s.abandoned[o.AttemptID]; ok {
			delete(s.abandoned, o.AttemptID)
			s.n.Add(-1)
		}
		s.mu.Unlock()
		return nil
	}
	k := spoolIndex{o.Scope, o.Key}
	if cur, ok := s.entries[k]; ok && cur.Fence == o.Fence && cur.AttemptID == o.AttemptID {
		delete(s.entries, k)
		s.n.Add(-1)
	}
	s.mu.Unlock()
	return nil
}

// spoolFileName names o's file after a hash of scope and key (which may
// hold any byte) and the fence; an abandoned claim's (fence unknown)
// after its attempt id as well.
func spoolFileName(o *SpooledOutcome) string {
	h := sha256.Sum256([]byte(o.Scope + "\x00" + o.Key))
	if o.Abandoned {
		a := sha256.Sum256([]byte(o.AttemptID))
		return hex.EncodeToString(h[:12]) + "-claim-" + hex.EncodeToString(a[:8]) + spoolSuffix
	}
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

// spoolAbandoned writes to the spool a claim whose answer was lost while
// the store was unreachable (cause), so that it is released once the
// store answers. It reports whether the claim is now durable in the
// spool; false without a spool, or when writing to it failed.
func (e *Engine) spoolAbandoned(req *Request, attemptID string, leaseUntil time.Time, cause error) bool {
	sp := e.cfg.Spool
	if sp == nil || e.txBound {
		return false
	}
	o := &SpooledOutcome{Scope: req.Scope, Key: string(req.Key), Fingerprint: req.Fingerprint, AttemptID: attemptID,
		Release: true, Abandoned: true, LeaseUntil: leaseUntil, SpooledAt: time.Now().UTC(), Cause: cause.Error()}
	log := e.cfg.Logger.With("key_hash", hashForLog(req.Scope, string(req.Key)))
	if err := sp.add(o); err != nil {
		log.Error("idem: a claim whose answer was lost could not be spooled; it is looked for until FinishTimeout", "store_err", cause, "spool_err", err)
		return false
	}
	log.Warn("idem: store unreachable; the claim it may have taken is spooled, to be released when it answers", "spool", sp.Dir(), "err", cause)
	if e.observe {
		e.cfg.Observer.Observe(context.Background(), Event{Kind: EventSpool, Delta: 1, Scope: req.Scope, Key: string(req.Key)})
	}
	return true
}

// errClaimMayLand says an abandoned claim was not found but may still land
// (its lease has not passed): it stays in the spool, looked for again.
var errClaimMayLand = errors.New("idem: the abandoned claim has not landed, and still may")

// applyAbandoned releases an abandoned claim if it landed: the record
// carries its attempt id and is in_progress (or unknown: its lease passed
// before anyone knew no effect ran). A record of another attempt means
// the claim never landed or was taken over: nothing to do. An absent
// record is done with once the claim's lease has passed on the engine's
// (store-corrected) clock; before, errClaimMayLand.
func (e *Engine) applyAbandoned(ctx context.Context, o *SpooledOutcome) error {
	var rec *Record
	err := e.retry(ctx, "get", func() (err error) {
		rec, err = e.store.Get(ctx, o.Scope, o.Key)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		if e.now().After(o.LeaseUntil) {
			return nil
		}
		return errClaimMayLand
	case err != nil:
		return err
	case rec.AttemptID != o.AttemptID || (rec.State != StateInProgress && rec.State != StateUnknown):
		return nil
	}
	return e.retry(ctx, "release", func() error {
		return e.store.Release(ctx, ReleaseParams{Scope: o.Scope, Key: o.Key, Fence: rec.Fence, AttemptID: o.AttemptID})
	})
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
		var err error
		if o.Abandoned {
			err = e.applyAbandoned(actx, &o)
		} else {
			err = e.applySpooled(actx, &o)
		}
		cancel()
		log := e.cfg.Logger.With("key_hash", hashForLog(o.Scope, o.Key), "fence", o.Fence)
		switch {
		case errors.Is(err, errClaimMayLand):
			continue
		case err == nil && o.Abandoned:
			log.Info("idem: abandoned claim settled: released if it had landed")
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
