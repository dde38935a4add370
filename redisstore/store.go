package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

// PubSubMode selects how write scripts notify waiters.
type PubSubMode int

const (
	// PubSubAuto uses sharded pub/sub (SPUBLISH/SSUBSCRIBE) when the server
	// has it (Redis 7.0+), else classic PUBLISH/SUBSCRIBE.
	PubSubAuto PubSubMode = iota
	// PubSubSharded always uses SPUBLISH/SSUBSCRIBE.
	PubSubSharded
	// PubSubClassic always uses PUBLISH/SUBSCRIBE. In a Cluster every
	// PUBLISH is broadcast to every node.
	PubSubClassic
	// PubSubOff publishes nothing; waiters are signalled every
	// PollFallback.
	PubSubOff
)

// Config configures a [Store]. The zero value is usable.
type Config struct {
	// Prefix starts every Redis key the store writes. It may not contain
	// '{', '}', glob characters (*?[]\) or bytes outside printable ASCII,
	// so it can never open a hash tag or match another store's keys in a
	// SCAN. Defaults to "idem".
	Prefix string

	// Wait, when set, makes Claim wait until the claim is replicated (WAIT)
	// and/or fsynced to the AOF (WAITAOF) before returning it as claimed, so
	// the claim is durable before the effect runs. See the package doc.
	// Defaults to nil: Claim returns as soon as the primary applied it.
	Wait *WaitConfig

	// Sentinel, for a client made by redis.NewFailoverClient, is the
	// options that client was made from: CheckReplication then also asks
	// the Sentinels which replicas they would promote (those not
	// connected to the primary now included) and how many Sentinels
	// watch it. The store only reads it. Defaults to nil: a primary
	// behind Sentinel is judged by what it reports itself (INFO
	// replication), which does not see a replica that is away.
	Sentinel *redis.FailoverOptions

	// PollFallback bounds how long a lost notification can go unnoticed.
	// Pub/sub is fire-and-forget: a message published while a subscriber
	// connection is down is lost. The store does not signal waiters on a
	// timer for that, which would make a waiter's reads grow with its
	// wait; it signals every subscription of a connection once it is
	// subscribed again (after go-redis reconnects, or a Cluster moves a
	// shard channel's slot), after marking the record as awaited. To find
	// a connection that died without an error, every PollFallback it
	// PINGs each subscriber connection that has been silent since the
	// last check, and replaces one that leaves a PING unanswered for
	// twice PollFallback (at least 5s). After a release or a resolve
	// (which a new claim may follow) and after a re-subscription, it
	// marks and signals once more PollFallback later. With PubSubOff
	// there is nothing to lose and nothing to wait for: every
	// subscription is signalled every PollFallback. Defaults to 1s.
	//
	// Versions before this one signalled every subscription every
	// PollFallback even while pub/sub worked.
	PollFallback time.Duration

	// ExpiryGrace is added to a record's ExpiresAt to form the key's Redis
	// TTL (PEXPIREAT). Claim decides expiry from the stored ExpiresAt and
	// the caller's clock, never from the TTL, so the grace only has to
	// cover clock skew between the callers and Redis: a Redis clock running
	// ahead must never evict a record before callers consider it expired.
	// Defaults to 5 minutes.
	ExpiryGrace time.Duration

	// PubSub selects the notification mechanism. Defaults to PubSubAuto.
	PubSub PubSubMode

	// Unpipelined sends every claim and outcome as a command of its own,
	// on a connection of the client's pool. By default, on a *redis.Client
	// (standalone or Sentinel) without Wait, the claim's SET NX GET and
	// the finish's EVALSHA of concurrent callers share pipelines:
	// go-redis's AutoPipeliner (the client's asynchronous one, shared with
	// its other users and closed with the client; go-redis marks its API
	// experimental) writes the commands queued while a batch is on the
	// wire as the next batch, on connections of the client's pipeline
	// pool. One command at a time goes alone, as with Unpipelined, so a
	// lone caller waits for nobody. Each command decides as it would
	// alone: pipelining changes how commands travel, not what they do. A
	// caller whose context ends stops waiting; its command may still run,
	// as a command alone may after its reply was given up on. A Cluster
	// client, and claims under Wait (which run on a pinned connection
	// followed by WAIT), always send commands alone.
	Unpipelined bool
}

// AllReplicas, as [WaitConfig].Replicas, makes each claim wait for every
// replica connected to its primary at that moment, and for at least
// WaitConfig.MinReplicas. See the package doc, "Replication".
const AllReplicas = -1

// WaitConfig asks Claim to confirm durability before returning.
type WaitConfig struct {
	// Replicas is how many replicas must acknowledge the claim (WAIT's
	// numreplicas), or AllReplicas: every replica the primary counts as
	// connected when the claim is made (ROLE), and at least MinReplicas.
	// A fixed count equal to the replicas there are is safe until a
	// failover leaves fewer, and then every claim fails; AllReplicas
	// follows the replicas connected and fails only below MinReplicas.
	// Defaults to 0 (no WAIT).
	Replicas int
	// MinReplicas, with Replicas set to AllReplicas, is the fewest
	// replicas that must acknowledge each claim: with fewer connected,
	// Claim fails with [ErrNotDurable] (closed: the effect does not run),
	// so that a primary that lost its replicas does not go on
	// acknowledging claims that only it holds. Only AllReplicas takes it.
	// Defaults to 1 (0 is taken as 1: a claim that must survive a
	// failover needs a replica to survive on; to run without replicas,
	// leave Wait nil).
	MinReplicas int
	// AOFLocal is WAITAOF's numlocal (0 or 1): 1 requires the primary to
	// have fsynced the claim to its AOF. Needs Redis 7.2+ with
	// appendonly yes. Defaults to 0.
	AOFLocal int
	// AOFReplicas is WAITAOF's numreplicas: how many replicas must have
	// fsynced the claim to their AOF. Needs Redis 7.2+. Defaults to 0.
	AOFReplicas int
	// Timeout bounds each WAIT/WAITAOF; when it passes with fewer
	// acknowledgements than asked, Claim returns an error wrapping
	// [ErrNotDurable]. Defaults to 1s.
	Timeout time.Duration
}

// ErrNotDurable is wrapped by Claim's error when the claim was written but
// WAIT or WAITAOF did not confirm it within WaitConfig.Timeout. The effect
// must not run. The store then releases the claim (best effort: no effect
// ran under it), so a retry claims the key afresh and waits again; a claim
// it could not release stays in_progress under the caller's attempt id, a
// retry of the same attempt finds it as its own and waits again, and
// otherwise the lease turns it unknown. It matches idem.ErrNotDurable: the
// engine does not retry such a claim (the wait had its bound).
var ErrNotDurable error = &idem.NotDurableError{Msg: "redisstore: claim not confirmed durable"}

// Store is an [idem.Store] and [idem.Notifier] on Redis (standalone,
// Sentinel or Cluster). It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
	wait   *WaitConfig
	grace  time.Duration
	// sentinel is Config.Sentinel: where CheckReplication asks Sentinel.
	sentinel *redis.FailoverOptions
	pubCmd   string      // "spublish", "publish" or ""
	pubArg   interface{} // pubCmd, boxed once for script arguments
	// finish is finishLua(pubCmd); finishSHA its hash, boxed once.
	finish    *redis.Script
	finishSHA interface{}
	cluster   *redis.ClusterClient
	hub       *hub
	closed    atomic.Bool

	// readFirst allows Claim's plain-read path: false when reads may be
	// served by replicas, whose copy may lag the primary's.
	readFirst bool
	mix       claimmix.Mix

	// setNXGet is true when the server takes SET with both NX and GET
	// (Redis 7.0+): Claim is then one plain command.
	setNXGet bool

	// pipelineWait is true when a claim and its WAIT go in one pipeline
	// (claimAndWait): Redis 7.0+, a WAIT count, no WAITAOF, and a read
	// timeout that outlasts the WAIT (a pipeline's reply is read under
	// the client's ReadTimeout, a lone WAIT under its own timeout).
	pipelineWait bool
	// replicas holds, per primary, the online replicas its last ROLE
	// listed (node address → *atomic.Int64), for AllReplicas.
	replicas sync.Map

	// ap, unless Config.Unpipelined (or the client is not a
	// *redis.Client, or Wait is set), carries the claim's SET NX GET and
	// the finish's EVALSHA of concurrent callers in shared pipelines;
	// lone is held by the one command going alone (see doRaw).
	ap   *redis.AutoPipeliner
	lone atomic.Bool
}

var (
	_ idem.Store    = (*Store)(nil)
	_ idem.Notifier = (*Store)(nil)
)

// probeTimeout bounds New's questions to the server.
const probeTimeout = 5 * time.Second

// New returns a store that uses client. The store does not own the client:
// Close stops the store's subscriber but leaves the client open. New
// validates cfg and asks the server (COMMAND INFO, bounded by 5s) which
// commands it has: SPUBLISH (Redis 7.0+, which also takes SET NX GET) and,
// when cfg asks for it, WAITAOF.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Store{client: client, prefix: cfg.Prefix, wait: cfg.Wait, grace: cfg.ExpiryGrace, sentinel: cfg.Sentinel}
	s.cluster, _ = client.(*redis.ClusterClient)
	s.readFirst = primaryReads(client)
	if err := s.probe(ctx, cfg); err != nil {
		return nil, err
	}
	s.pubArg = s.pubCmd
	s.finish = redis.NewScript(finishLua(s.pubCmd))
	s.finishSHA = s.finish.Hash()
	if c, ok := client.(*redis.Client); ok && s.wait == nil && !cfg.Unpipelined {
		ap, err := c.AsyncAutoPipeline()
		if err != nil {
			return nil, fmt.Errorf("redisstore: the client's AutoPipeliner (set Config.Unpipelined to send commands alone): %w", err)
		}
		s.ap = ap
	}
	s.hub = newHub(s, cfg.PollFallback)
	return s, nil
}

func (c *Config) setDefaults() error {
	if c.Prefix == "" {
		c.Prefix = "idem"
	}
	if i := strings.IndexFunc(c.Prefix, func(r rune) bool {
		return r < 0x21 || r > 0x7e || strings.ContainsRune("{}*?[]\\", r)
	}); i >= 0 {
		return fmt.Errorf("redisstore: Config.Prefix %q: byte %d may not appear in a prefix", c.Prefix, i)
	}
	if c.PollFallback == 0 {
		c.PollFallback = time.Second
	}
	if c.PollFallback < 0 {
		return errors.New("redisstore: Config.PollFallback must not be negative")
	}
	if c.ExpiryGrace == 0 {
		c.ExpiryGrace = 5 * time.Minute
	}
	if c.ExpiryGrace < 0 {
		return errors.New("redisstore: Config.ExpiryGrace must not be negative")
	}
	if c.PubSub < PubSubAuto || c.PubSub > PubSubOff {
		return fmt.Errorf("redisstore: Config.PubSub: unknown mode %d", c.PubSub)
	}
	if c.Wait != nil {
		w := *c.Wait // the caller's struct is left as it was
		c.Wait = &w
	}
	return c.Wait.validate()
}

func (w *WaitConfig) validate() error {
	if w == nil {
		return nil
	}
	if w.Replicas < AllReplicas || w.AOFLocal < 0 || w.AOFLocal > 1 || w.AOFReplicas < 0 {
		return errors.New("redisstore: Config.Wait: Replicas must be >= 0 or AllReplicas, AOFReplicas >= 0, AOFLocal 0 or 1")
	}
	if w.MinReplicas < 0 {
		return errors.New("redisstore: Config.Wait.MinReplicas must not be negative")
	}
	if w.MinReplicas > 0 && w.Replicas != AllReplicas {
		return errors.New("redisstore: Config.Wait.MinReplicas needs Replicas = AllReplicas (a fixed Replicas count is already the minimum)")
	}
	if w.Replicas == AllReplicas && w.MinReplicas == 0 {
		w.MinReplicas = 1
	}
	if w.Replicas == 0 && w.AOFLocal == 0 && w.AOFReplicas == 0 {
		return errors.New("redisstore: Config.Wait asks for no acknowledgement; set Replicas, AOFLocal or AOFReplicas, or leave Wait nil")
	}
	if w.Timeout == 0 {
		w.Timeout = time.Second
	}
	if w.Timeout < 0 {
		return errors.New("redisstore: Config.Wait.Timeout must not be negative")
	}
	return nil
}

// probe asks the server which commands it has.
func (s *Store) probe(ctx context.Context, cfg Config) error {
	if s.wait != nil {
		switch s.client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return fmt.Errorf("redisstore: Config.Wait needs a *redis.Client or *redis.ClusterClient (WAIT must run on the claim's own connection), got %T", s.client)
		}
		if s.wait.AOFLocal > 0 || s.wait.AOFReplicas > 0 {
			ok, err := s.hasCommand(ctx, "waitaof")
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("redisstore: Config.Wait asks for WAITAOF, which this server does not have (needs Redis 7.2+)")
			}
		}
	}
	// SPUBLISH and SET with both NX and GET came with Redis 7.0: the one
	// tells of the other.
	has7, err := s.hasCommand(ctx, "spublish")
	if err != nil {
		return err
	}
	s.setNXGet = has7
	if w := s.wait; w != nil && has7 && w.Replicas != 0 && w.AOFLocal == 0 && w.AOFReplicas == 0 {
		rt := readTimeout(s.client)
		s.pipelineWait = rt < 0 || w.Timeout+time.Second <= rt
	}
	switch cfg.PubSub {
	case PubSubSharded:
		s.pubCmd = "spublish"
	case PubSubClassic:
		s.pubCmd = "publish"
	case PubSubAuto:
		s.pubCmd = "publish"
		if has7 {
			s.pubCmd = "spublish"
		}
	}
	return nil
}

// readTimeout is the client's ReadTimeout (go-redis's 3s when unset;
// negative: none).
func readTimeout(c redis.UniversalClient) time.Duration {
	var rt time.Duration
	switch c := c.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	if rt == 0 {
		rt = 3 * time.Second
	}
	return rt
}

func (s *Store) hasCommand(ctx context.Context, name string) (bool, error) {
	res, err := s.client.Do(ctx, "command", "info", name).Slice()
	if err != nil {
		return false, fmt.Errorf("redisstore: probing server for %s: %w", strings.ToUpper(name), err)
	}
	return len(res) == 1 && res[0] != nil, nil
}

// Close stops the store's subscriber and wakes its waiters. It does not
// close the client. Later calls return idem.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.hub.close()
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return nil
}

// noteErr asks a Cluster client to reload its slot map after err, when
// err may mean that the map is stale: a connection that failed (the
// slot's master may have died and a replica taken over), CLUSTERDOWN,
// TRYAGAIN, MOVED, ASK or READONLY. go-redis reloads the map on a
// redirect it follows itself, and otherwise only every
// ClusterOptions.ClusterStateReloadInterval (60s by default), so without
// this a failover would cost the failed shard's claims up to a minute.
// Reloads are lazy and coalesced by go-redis (at most one at a time, 200
// ms apart). It returns err.
func (s *Store) noteErr(err error) error {
	if s.cluster == nil || err == nil || errors.Is(err, ErrNotDurable) {
		return err
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		stale := false
		for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "MOVED ", "ASK ", "READONLY"} {
			stale = stale || strings.HasPrefix(msg, p)
		}
		if !stale {
			return err
		}
	}
	s.cluster.ReloadState(context.Background())
	return err
}

func storeErr(op string, err error) error {
	return &idem.StoreError{Op: op, Err: err}
}
