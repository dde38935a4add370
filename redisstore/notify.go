package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Subscribe implements [idem.Notifier]. The returned channel receives a
// value (coalesced) whenever a write script publishes on the record's
// channel, and also every Config.PollFallback, since pub/sub messages are
// lost while a subscriber connection is down. Subscribe returns only after
// Redis confirmed the subscription and the record, if in_progress, was
// marked as awaited (markAwaitedScript: finishes publish only for awaited
// records), so a write made after Subscribe returns is never missed while
// the connection stays up.
//
// All subscriptions of a Store share one subscriber connection (one per
// master in a Cluster with sharded pub/sub) and one dispatch goroutine per
// connection, plus one ticker goroutine; Close stops them all.
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

type hub struct {
	s    *Store
	poll time.Duration
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	ticking bool
	groups  map[string]*group // by subscriber node address; "" when one connection serves all
	all     map[*waiter]struct{}
}

// group is one subscriber connection and the channels subscribed on it.
type group struct {
	ps    *redis.PubSub
	chans map[string]*channelSubs
}

type channelSubs struct {
	confirmed chan struct{} // closed when Redis confirms the subscription
	isConf    bool
	waiters   map[*waiter]struct{}
}

type waiter struct{ ch chan struct{} }

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func newHub(s *Store, poll time.Duration) *hub {
	return &hub{s: s, poll: poll, stop: make(chan struct{}), groups: map[string]*group{}, all: map[*waiter]struct{}{}}
}

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
	h.startTicker()
	h.all[w] = struct{}{}
	var confirmed chan struct{}
	if h.s.pubCmd != "" {
		confirmed, err = h.addLocked(ctx, route, node, ch, w)
	}
	h.mu.Unlock()
	var once sync.Once
	cancel := func() { once.Do(func() { h.remove(route, ch, w) }) }
	if err != nil {
		cancel()
		return nil, nil, storeErr("subscribe", err)
	}
	if confirmed != nil {
		select {
		case <-confirmed:
		case <-h.stop:
		case <-ctx.Done():
			cancel()
			return nil, nil, ctx.Err()
		}
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

func (h *hub) addLocked(ctx context.Context, route string, node redis.UniversalClient, ch string, w *waiter) (chan struct{}, error) {
	g := h.groups[route]
	if g == nil {
		g = &group{chans: map[string]*channelSubs{}}
		if h.s.pubCmd == "spublish" {
			g.ps = node.SSubscribe(ctx)
		} else {
			g.ps = node.Subscribe(ctx)
		}
		h.groups[route] = g
		h.wg.Add(1)
		go h.receive(g)
	}
	cs := g.chans[ch]
	if cs == nil {
		cs = &channelSubs{confirmed: make(chan struct{}), waiters: map[*waiter]struct{}{}}
		g.chans[ch] = cs
		if err := h.sendSub(ctx, g, ch, true); err != nil {
			delete(g.chans, ch)
			return nil, err
		}
	}
	cs.waiters[w] = struct{}{}
	return cs.confirmed, nil
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

func (h *hub) remove(route, ch string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.all, w)
	g := h.groups[route]
	if g == nil {
		return
	}
	cs := g.chans[ch]
	if cs == nil {
		return
	}
	delete(cs.waiters, w)
	// An unconfirmed channel is unsubscribed by receive when its
	// confirmation arrives, so a late confirmation never meets a newer
	// subscription of the same channel.
	if len(cs.waiters) == 0 && cs.isConf && !h.closed {
		delete(g.chans, ch)
		_ = h.sendSub(context.Background(), g, ch, false)
	}
}

// receive dispatches one connection's messages until the hub closes.
func (h *hub) receive(g *group) {
	defer h.wg.Done()
	ctx := context.Background()
	for {
		msg, err := g.ps.Receive(ctx)
		if err != nil {
			if h.isClosed() {
				return
			}
			// Messages may have been lost while the connection was down:
			// wake every waiter of this connection to re-read, then let
			// go-redis reconnect and resubscribe on the next Receive.
			h.signalGroup(g)
			select {
			case <-h.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			h.signalChannel(g, m.Channel)
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				h.confirm(g, m.Channel)
			}
		}
	}
}

func (h *hub) confirm(g *group, ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := g.chans[ch]
	if cs == nil {
		return
	}
	if cs.isConf {
		// A resubscription after a reconnect: messages may have been lost.
		for w := range cs.waiters {
			w.signal()
		}
		return
	}
	cs.isConf = true
	close(cs.confirmed)
	if len(cs.waiters) == 0 && !h.closed {
		delete(g.chans, ch)
		_ = h.sendSub(context.Background(), g, ch, false)
	}
}

func (h *hub) signalChannel(g *group, ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs := g.chans[ch]; cs != nil {
		for w := range cs.waiters {
			w.signal()
		}
	}
}

func (h *hub) signalGroup(g *group) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cs := range g.chans {
		for w := range cs.waiters {
			w.signal()
		}
	}
}

// startTicker starts the PollFallback ticker on first use; h.mu is held.
func (h *hub) startTicker() {
	if h.ticking {
		return
	}
	h.ticking = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(h.poll)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.mu.Lock()
				for w := range h.all {
					w.signal()
				}
				h.mu.Unlock()
			}
		}
	}()
}

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
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
	for w := range h.all {
		w.signal()
	}
	h.mu.Unlock()
	for _, g := range groups {
		_ = g.ps.Close()
	}
	h.wg.Wait()
}
