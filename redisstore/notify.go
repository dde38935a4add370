package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Subscribe implements [idem.Notifier]. The returned channel receives a
// value (coalesced) whenever a write script publishes on the record's
// channel, and whenever a message may have been lost: after the
// subscription was re-established (a reconnect, a subscriber connection
// that stopped answering PING, a slot that moved). Subscribe returns only
// after Redis confirmed the subscription and the record, if in_progress,
// was marked as awaited (markAwaitedScript: finishes publish only for
// awaited records), so a write made after Subscribe returns is never
// missed while the connection stays up. Nothing signals on a timer while
// pub/sub works, so a waiter's reads do not grow with the wait; with
// PubSubOff the channel is signalled every Config.PollFallback. When the
// subscription cannot be sent now (the subscriber connection cannot be
// opened), Subscribe fails at once with a store error, and the engine
// polls instead; a waiter joining a channel confirmed earlier whose
// connection is down meanwhile is signalled once it is subscribed again.
//
// All subscriptions of a Store share one subscriber connection (one per
// master in a Cluster with sharded pub/sub) and one dispatch goroutine per
// connection, plus a health-check goroutine and a re-subscribing one;
// Close stops them all.
func (s *Store) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	rec := s.recKey(scope, key)
	ch, cancel, err := s.hub.subscribe(ctx, chanKey(rec))
	if err != nil || s.pubCmd == "" {
		return ch, cancel, err
	}
	// A finish publishes only for a record marked as awaited.
	if err := markAwaitedScript.Run(ctx, s.client, []string{rec}).Err(); err != nil {
		cancel()
		return nil, nil, storeErr("subscribe", wrongType(err))
	}
	return ch, cancel, nil
}

// Timing of the hub's recovery from lost subscriptions.
const (
	// rehomeMin and rehomeMax bound the backoff between attempts to
	// subscribe again the channels of a failed connection.
	rehomeMin = 100 * time.Millisecond
	rehomeMax = 5 * time.Second
	// deadAfterMin is the least time a PING may go unanswered before the
	// subscriber connection is taken for dead (deadAfter: the larger of it
	// and twice PollFallback).
	deadAfterMin = 5 * time.Second
	// resyncTimeout bounds the awaited mark the hub writes before a signal.
	resyncTimeout = 5 * time.Second
)

// hub multiplexes a Store's subscriptions. A channel (one per record) is
// subscribed once, on the connection of its route, whatever the number of
// waiters; the hub signals its waiters on a message, and "resyncs" them —
// marks the record as awaited, then signals — whenever a message may have
// been lost or the record may have been claimed again without the mark.
type hub struct {
	s         *Store
	poll      time.Duration
	deadAfter time.Duration
	stop      chan struct{}
	kick      chan struct{} // wakes the re-subscribing goroutine (cap 1)
	wg        sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	started bool
	groups  map[string]*group // by subscriber node address; "" when one connection serves all
	chans   map[string]*subs  // every channel with waiters, or awaiting its confirmation
	orphans map[string]*subs  // channels with waiters that no connection carries: to subscribe again
	backoff time.Duration     // before the next attempt on orphans
}

// group is one subscriber connection and the channels subscribed on it. A
// group whose connection failed is dead: its channels became orphans, and
// a new group takes its route.
type group struct {
	route  string
	ps     *redis.PubSub
	chans  map[string]*subs
	dead   bool
	heard  bool      // something arrived since the last health check
	pingAt time.Time // when an unanswered PING was sent; zero if none
}

// subs is one channel's subscription and its waiters.
type subs struct {
	ch        string
	g         *group        // the connection carrying it; nil when orphaned or with PubSubOff
	confirmed chan struct{} // closed when Redis first confirms the subscription
	isConf    bool          // confirmed has been closed
	live      bool          // confirmed on g's current connection
	waiters   map[*waiter]struct{}
}

type waiter struct {
	ch chan struct{}
	cs *subs
}

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (cs *subs) signal() {
	for w := range cs.waiters {
		w.signal()
	}
}

func newHub(s *Store, poll time.Duration) *hub {
	return &hub{
		s: s, poll: poll, deadAfter: max(2*poll, deadAfterMin),
		stop: make(chan struct{}), kick: make(chan struct{}, 1),
		groups: map[string]*group{}, chans: map[string]*subs{}, orphans: map[string]*subs{},
		backoff: rehomeMin,
	}
}

// errNoPubSub reports a channel the hub cannot subscribe now: the pub/sub
// connection for it could not be opened or written to.
var errNoPubSub = errors.New("pub/sub connection unavailable")

func (h *hub) subscribe(ctx context.Context, ch string) (<-chan struct{}, func(), error) {
	w := &waiter{ch: make(chan struct{}, 1)}
	route, node, err := h.route(ctx, ch)
	if err != nil {
		return nil, nil, storeErr("subscribe", err)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, nil, idem.ErrClosed
	}
	h.startLocked()
	cs := h.chans[ch]
	unreachable := false
	if cs == nil {
		cs = &subs{ch: ch, confirmed: make(chan struct{}), waiters: map[*waiter]struct{}{}}
		h.chans[ch] = cs
		if h.s.pubCmd == "" {
			cs.isConf = true
			close(cs.confirmed)
		} else {
			// On failure the channel is an orphan: the re-subscribing
			// goroutine retries it for the waiters that join it later.
			unreachable = !h.homeLocked(ctx, route, node, cs)
		}
	} else if cs.g == nil && !cs.isConf {
		unreachable = true // an orphan never confirmed: its connection is down
	}
	cs.waiters[w] = struct{}{}
	w.cs = cs
	h.mu.Unlock()
	var once sync.Once
	cancel := func() { once.Do(func() { h.remove(w) }) }
	if unreachable {
		// The caller polls instead (the engine does when Subscribe fails)
		// rather than wait, without reading, for pub/sub to come back.
		cancel()
		return nil, nil, storeErr("subscribe", errNoPubSub)
	}
	select {
	case <-cs.confirmed:
	case <-h.stop:
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
	return w.ch, cancel, nil
}

// route names the connection that must carry ch: with sharded pub/sub in a
// Cluster, the master owning ch's slot; otherwise the one shared connection.
func (h *hub) route(ctx context.Context, ch string) (string, redis.UniversalClient, error) {
	if h.s.cluster == nil || h.s.pubCmd != "spublish" {
		return "", h.s.client, nil
	}
	node, err := h.s.cluster.MasterForKey(ctx, ch)
	if err != nil {
		return "", nil, err
	}
	return node.Options().Addr, node, nil
}

// homeLocked subscribes cs on the connection of route, opening it if
// needed. When the command cannot be sent, cs becomes an orphan. h.mu is
// held.
func (h *hub) homeLocked(ctx context.Context, route string, node redis.UniversalClient, cs *subs) bool {
	g := h.groups[route]
	if g == nil {
		g = &group{route: route, chans: map[string]*subs{}}
		if h.s.pubCmd == "spublish" {
			g.ps = node.SSubscribe(ctx)
		} else {
			g.ps = node.Subscribe(ctx)
		}
		h.groups[route] = g
		h.wg.Add(1)
		go h.receive(g)
	}
	g.chans[cs.ch] = cs
	cs.g, cs.live = g, false
	// One channel per command: SSUBSCRIBE refuses channels of different
	// slots in one command (CROSSSLOT).
	if err := h.sendSub(ctx, g, cs.ch, true); err != nil {
		delete(g.chans, cs.ch)
		cs.g = nil
		h.orphans[cs.ch] = cs
		h.kickLocked()
		return false
	}
	return true
}

func (h *hub) sendSub(ctx context.Context, g *group, ch string, sub bool) error {
	switch {
	case sub && h.s.pubCmd == "spublish":
		return g.ps.SSubscribe(ctx, ch)
	case sub:
		return g.ps.Subscribe(ctx, ch)
	case h.s.pubCmd == "spublish":
		return g.ps.SUnsubscribe(ctx, ch)
	default:
		return g.ps.Unsubscribe(ctx, ch)
	}
}

func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := w.cs
	delete(cs.waiters, w)
	if len(cs.waiters) > 0 || h.closed {
		return
	}
	switch {
	case cs.g == nil: // an orphan, or PubSubOff
		h.dropLocked(cs)
	case cs.live:
		h.dropLocked(cs)
		_ = h.sendSub(context.Background(), cs.g, cs.ch, false)
		delete(cs.g.chans, cs.ch)
		cs.g, cs.live = nil, false
	default:
		// Awaiting its confirmation: receive unsubscribes it when the
		// confirmation arrives, so a late confirmation never meets a newer
		// subscription of the same channel, which reuses cs meanwhile.
	}
}

// redirected reports a MOVED or ASK error reply: a command sent for a slot
// this node no longer serves, which leaves the connection usable.
func redirected(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// dropLocked forgets cs, which has no waiters left.
func (h *hub) dropLocked(cs *subs) {
	if h.chans[cs.ch] == cs {
		delete(h.chans, cs.ch)
	}
	if h.orphans[cs.ch] == cs {
		delete(h.orphans, cs.ch)
	}
}

// receive dispatches one connection's messages until it fails or the hub
// closes.
func (h *hub) receive(g *group) {
	defer h.wg.Done()
	ctx := context.Background()
	for {
		msg, err := g.ps.Receive(ctx)
		if redirected(err) {
			// An unsubscribe the hub sent for a channel whose slot moved
			// (see unsubscribedLocked) is answered MOVED by the old owner.
			// The connection is fine and go-redis has already forgotten
			// the channel: nothing to do.
			continue
		}
		if err != nil {
			// The connection broke (go-redis may have reconnected and
			// re-sent every channel in one command, which a Cluster refuses
			// across slots), an error answered a command, or the health
			// check closed it: subscribe its channels again from scratch.
			h.fail(g)
			return
		}
		h.mu.Lock()
		if g.dead {
			h.mu.Unlock()
			return
		}
		g.heard, g.pingAt = true, time.Time{}
		switch m := msg.(type) {
		case *redis.Message:
			if cs := g.chans[m.Channel]; cs != nil && cs.g == g {
				if m.Payload == "f" {
					// A finish: the record is recorded or unknown, so the
					// waiters' next read ends their wait.
					cs.signal()
				} else {
					// A release or a resolve may be followed at once by a
					// new claim, which is not marked as awaited.
					h.resyncLocked(cs, true)
				}
			}
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmLocked(g, m.Channel)
			case "unsubscribe", "sunsubscribe":
				h.unsubscribedLocked(g, m.Channel)
			}
		}
		h.mu.Unlock()
	}
}

// confirmLocked handles Redis's confirmation of ch on g. h.mu is held.
func (h *hub) confirmLocked(g *group, ch string) {
	cs := g.chans[ch]
	if cs == nil || cs.g != g {
		return
	}
	cs.live = true
	h.backoff = rehomeMin // the connection works
	first := !cs.isConf
	if first {
		cs.isConf = true
		close(cs.confirmed)
	}
	if len(cs.waiters) == 0 {
		if !h.closed {
			h.dropLocked(cs)
			delete(g.chans, ch)
			cs.g, cs.live = nil, false
			_ = h.sendSub(context.Background(), g, ch, false)
		}
		return
	}
	if !first {
		// Subscribed again after a reconnect or a move: messages may have
		// been lost while it was not.
		h.resyncLocked(cs, true)
	}
}

// unsubscribedLocked handles an unsubscribe of ch on g. One the hub sent
// left g.chans first (or concerns a subscription not yet confirmed again);
// any other comes from the server — a Cluster unsubscribes a shard
// channel whose slot moved to another master — and ch must be subscribed
// again where its slot now lives. h.mu is held.
func (h *hub) unsubscribedLocked(g *group, ch string) {
	cs := g.chans[ch]
	if cs == nil || cs.g != g || !cs.live {
		return
	}
	delete(g.chans, ch)
	cs.g, cs.live = nil, false
	// go-redis still lists ch on g's connection; let it forget it. Its
	// answer meets no live subscription of ch on g.
	_ = h.sendSub(context.Background(), g, ch, false)
	h.orphanLocked(cs)
	if h.s.cluster != nil {
		h.s.cluster.ReloadState(context.Background())
	}
}

// orphanLocked queues cs, carried by no connection, to be subscribed
// again, or forgets it when it has no waiters. h.mu is held.
func (h *hub) orphanLocked(cs *subs) {
	if len(cs.waiters) == 0 {
		h.dropLocked(cs)
		return
	}
	h.orphans[cs.ch] = cs
	h.kickLocked()
}

func (h *hub) kickLocked() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// fail retires g after its connection failed: its channels become orphans,
// to be subscribed again (and their waiters resynced once confirmed).
func (h *hub) fail(g *group) {
	h.mu.Lock()
	if g.dead || h.closed {
		h.mu.Unlock()
		return
	}
	g.dead = true
	if h.groups[g.route] == g {
		delete(h.groups, g.route)
	}
	for _, cs := range g.chans {
		if cs.g == g {
			cs.g, cs.live = nil, false
			h.orphanLocked(cs)
		}
	}
	g.chans = nil
	h.mu.Unlock()
	_ = g.ps.Close()
}

// rehome subscribes orphaned channels again, one command each, with
// backoff while it fails.
func (h *hub) rehome() {
	defer h.wg.Done()
	for {
		select {
		case <-h.stop:
			return
		case <-h.kick:
		}
		h.mu.Lock()
		d := h.backoff
		h.backoff = min(2*d, rehomeMax)
		h.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if h.s.cluster != nil {
			h.s.cluster.ReloadState(context.Background())
		}
		h.mu.Lock()
		todo := make([]*subs, 0, len(h.orphans))
		for _, cs := range h.orphans {
			todo = append(todo, cs)
		}
		h.mu.Unlock()
		// A route that failed once in a round is not dialled again in it:
		// one dial per unreachable node and round, not one per channel.
		failed, probed := map[string]bool{}, map[string]bool{}
		for _, cs := range todo {
			ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
			route, node, err := h.route(ctx, cs.ch)
			if err == nil && !probed[route] {
				// Ask the node first, without the hub's lock: subscribing
				// dials under it, and a dial to a node that is down can
				// take the dial timeout, stalling every other connection's
				// dispatch meanwhile.
				probed[route] = true
				if node.Ping(ctx).Err() != nil {
					failed[route] = true
				}
			}
			h.mu.Lock()
			switch {
			case h.closed:
				h.mu.Unlock()
				cancel()
				return
			case h.orphans[cs.ch] != cs: // dropped meanwhile
			case err != nil || failed[route]:
				h.kickLocked() // try again later
			default:
				delete(h.orphans, cs.ch)
				if !h.homeLocked(ctx, route, node, cs) {
					failed[route] = true
				}
			}
			h.mu.Unlock()
			cancel()
		}
	}
}

// resyncLocked marks cs's record as awaited, then signals its waiters, so
// that a new claim of the record found by their next read publishes its
// finish. With again, it does so once more PollFallback later: a claim
// made between the mark and a waiter's read is marked then. h.mu is held.
func (h *hub) resyncLocked(cs *subs, again bool) {
	if h.closed {
		return
	}
	rec := cs.ch[:len(cs.ch)-len("ch")] + "rec"
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
			_ = markAwaitedScript.Run(ctx, h.s.client, []string{rec}).Err()
			cancel()
			h.mu.Lock()
			cs.signal()
			h.mu.Unlock()
			if !again {
				return
			}
			again = false
			t := time.NewTimer(h.poll)
			select {
			case <-h.stop:
				t.Stop()
				return
			case <-t.C:
			}
			h.mu.Lock()
			n := len(cs.waiters)
			h.mu.Unlock()
			if n == 0 {
				return
			}
		}
	}()
}

// startLocked starts the hub's background goroutines on first use. With
// pub/sub, a health check every PollFallback PINGs each connection that
// carries channels and has been silent since the last check, and retires
// one whose PING stays unanswered for deadAfter (a connection that died
// without an error, which no read would notice); and a goroutine
// subscribes orphans again. With PubSubOff, every waiter is signalled
// every PollFallback. h.mu is held.
func (h *hub) startLocked() {
	if h.started {
		return
	}
	h.started = true
	h.wg.Add(1)
	go h.tick()
	if h.s.pubCmd != "" {
		h.wg.Add(1)
		go h.rehome()
	}
}

func (h *hub) tick() {
	defer h.wg.Done()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if h.s.pubCmd == "" {
			h.mu.Lock()
			for _, cs := range h.chans {
				cs.signal()
			}
			h.mu.Unlock()
			continue
		}
		var ping, dead []*group
		now := time.Now()
		h.mu.Lock()
		for _, g := range h.groups {
			switch {
			case len(g.chans) == 0:
			case g.heard:
				g.heard = false
			case g.pingAt.IsZero():
				g.pingAt = now
				ping = append(ping, g)
			case now.Sub(g.pingAt) >= h.deadAfter:
				dead = append(dead, g)
			}
		}
		h.mu.Unlock()
		for _, g := range ping {
			ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
			_ = g.ps.Ping(ctx) // the answer arrives through receive
			cancel()
		}
		for _, g := range dead {
			h.fail(g)
		}
	}
}

// close stops the goroutines, closes the subscriber connections and wakes
// every waiter once so it re-reads (and meets ErrClosed).
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	close(h.stop)
	groups := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		groups = append(groups, g)
	}
	for _, cs := range h.chans {
		cs.signal()
	}
	h.mu.Unlock()
	for _, g := range groups {
		_ = g.ps.Close()
	}
	h.wg.Wait()
}
