package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotifyDisabled is returned by [Store.Subscribe] when the store was
// configured with DisableNotify; callers poll instead.
var ErrNotifyDisabled = errors.New("pgstore: notifications are disabled")

// Subscribe implements [idem.Notifier]. The channel receives a value
// (coalesced) after any committed Finish, Release or Resolve of (scope, key)
// that follows the subscription, and spuriously after the listener
// connection was re-established, since notifications sent while it was down
// are lost.
//
// To keep NOTIFY (which serializes commits database-wide) off the hot path,
// outcomes notify only for records a waiter has flagged: Subscribe sets the
// record's waiting flag when it is in_progress (one small write, by the
// first waiter only). Callers re-read the record after Subscribe returns,
// as the engine does.
//
// All subscriptions of a store share one dedicated listener connection
// (outside the pool), started by the first Subscribe and stopped by Close.
// Subscribe returns once that connection is listening, so a change committed
// after Subscribe returns is never missed; ctx bounds that wait only. cancel
// is idempotent and must be called to release the subscription.
func (s *Store) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	if s.closed.Load() {
		return nil, nil, errClosed("subscribe")
	}
	if s.lis == nil {
		return nil, nil, ErrNotifyDisabled
	}
	ch, cancel, err := s.lis.subscribe(ctx, keyToken(scope, key))
	if err != nil {
		return nil, nil, err
	}
	// Flag the record only now that the listener is listening: an outcome
	// recorded after the flag is then sure to reach this subscriber.
	if _, err := s.ops.db.exec(ctx, s.sql.markWaiting, scope, key); err != nil {
		cancel()
		return nil, nil, wrap("subscribe", err)
	}
	return ch, cancel, nil
}

// listener owns the LISTEN connection and fans notifications out to
// subscribers by key token.
type listener struct {
	connCfg    *pgx.ConnConfig
	channel    string
	channelArg any // channel as a statement parameter, boxed once

	mu      sync.Mutex
	subs    map[string]map[*subscription]struct{}
	started bool
	stopped bool
	ready   chan struct{} // closed while a connection is listening
	lastErr error         // why the last connection attempt failed
	pid     uint32        // backend of the listening connection (tests)
	cancel  context.CancelFunc
	stopCh  chan struct{}
	done    chan struct{}
}

type subscription struct{ ch chan struct{} }

// Reconnect backoff bounds.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	return &listener{
		connCfg:    cfg,
		channel:    channel,
		channelArg: channel,
		subs:       make(map[string]map[*subscription]struct{}),
		ready:      make(chan struct{}),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
	}
}

func (l *listener) subscribe(ctx context.Context, token string) (<-chan struct{}, func(), error) {
	sub := &subscription{ch: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil, nil, errClosed("subscribe")
	}
	l.startLocked()
	if l.subs[token] == nil {
		l.subs[token] = make(map[*subscription]struct{})
	}
	l.subs[token][sub] = struct{}{}
	ready := l.ready
	l.mu.Unlock()

	var once sync.Once
	cancel := func() { once.Do(func() { l.remove(token, sub) }) }
	select {
	case <-ready:
		return sub.ch, cancel, nil
	case <-l.stopCh:
		cancel()
		return nil, nil, errClosed("subscribe")
	case <-ctx.Done():
		cancel()
		return nil, nil, wrap("subscribe", l.waitError(ctx.Err()))
	}
}

// waitError explains a Subscribe that gave up waiting for the listener.
func (l *listener) waitError(ctxErr error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastErr != nil {
		return fmt.Errorf("listener not connected (last error: %v): %w", l.lastErr, ctxErr)
	}
	return ctxErr
}

func (l *listener) remove(token string, sub *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs[token], sub)
	if len(l.subs[token]) == 0 {
		delete(l.subs, token)
	}
}

func (l *listener) startLocked() {
	if l.started {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(ctx)
}

// stop ends the listener and waits for its goroutine.
func (l *listener) stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	close(l.stopCh)
	started := l.started
	l.mu.Unlock()
	if started {
		l.cancel()
		<-l.done
	}
}

// run keeps one listening connection alive until ctx ends, reconnecting
// with capped exponential backoff.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := minBackoff
	for {
		listened, err := l.session(ctx)
		l.down(err)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session connects, listens and dispatches until the connection fails.
func (l *listener) session(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.connCfg)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx) //nolint:errcheck // the connection is being discarded
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false, err
	}
	l.up(conn.PgConn().PID())
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.dispatch(n.Payload)
	}
}

// up marks the listener ready and wakes every subscriber: notifications
// sent while no connection was listening are lost, so each must re-check.
func (l *listener) up(pid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pid, l.lastErr = pid, nil
	close(l.ready)
	for _, subs := range l.subs {
		for sub := range subs {
			signal(sub.ch)
		}
	}
}

func (l *listener) down(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = err
	select {
	case <-l.ready:
		l.ready = make(chan struct{})
	default:
	}
}

func (l *listener) dispatch(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sub := range l.subs[token] {
		signal(sub.ch)
	}
}

// signal sends without blocking; a pending value already says "changed".
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
