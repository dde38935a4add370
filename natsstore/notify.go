package natsstore

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Subscribe implements [idem.Notifier] with a watch of the record's key:
// an ordered consumer on the bucket's stream that delivers every new
// revision of the key (headers only), so a waiter learns of an outcome
// without polling. The first delivery, the value the key held when the
// watch started, signals too: a change made between the caller's read and
// the watch's start is never missed. The channel is never closed; after
// cancel it receives nothing more.
func (s *Store) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	if err := s.check(ctx); err != nil {
		return nil, nil, err
	}
	// The watch lives as long as its context: one of its own, ended by
	// cancel, that only the creation's timer may end sooner.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	timer := time.AfterFunc(s.timeout, wcancel)
	w, err := s.kv.Watch(wctx, recordKey(scope, key), jetstream.MetaOnly())
	if !timer.Stop() && err == nil {
		_ = w.Stop()
		err = context.DeadlineExceeded
	}
	if err != nil {
		wcancel()
		return nil, nil, storeErr("subscribe", err)
	}
	ch := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func(stop <-chan struct{}) {
		defer close(done)
		stopped := false
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || stopped {
					continue
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			case <-stop:
				if !stopped {
					stopped = true
					_ = w.Stop() // the updates channel closes after it
				}
				stop = nil
			}
		}
	}(stop)
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(stop)
			<-done
			wcancel()
		})
	}
	return ch, cancel, nil
}
