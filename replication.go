package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The unique constraint decides who owns a key only if the row that
// decided it survives. A store whose replication can lose an acknowledged
// write — an asynchronous PostgreSQL standby promoted after the primary
// died, a Redis replica promoted by Sentinel or Cluster before it received
// the claim — forgets claims in a failover, and every retry that follows
// claims its key afresh and runs the effect a second time. Stores that can
// read their replication implement [ReplicationChecker]; [New] asks them and
// refuses a setup where a failover can lose a claim, unless
// Config.AllowAsyncReplication says to go on.

// ReplicationChecker is implemented by stores that can read how their
// backend replicates, and so whether a claim acknowledged to the engine
// survives a failover the backend is configured to perform.
type ReplicationChecker interface {
	// CheckReplication describes the store's replication and returns one
	// finding per setting that lets a failover lose an acknowledged claim
	// (Severity SeverityRefuse) or weakens the guarantee in a rarer event
	// (SeverityWarning). A standalone server with no replica has nothing
	// a failover could lose: no finding. A setting it cannot read (a
	// privilege the store's user lacks) is a warning finding that says
	// so. An error means the check could not run at all. ctx bounds the
	// check.
	CheckReplication(ctx context.Context) (Replication, error)
}

// Replication is what a [ReplicationChecker] found.
type Replication struct {
	// Topology describes the setup in a few words, as an operator would:
	// "standalone primary, no standby", "primary with 1 synchronous
	// standby (synchronous_commit=on for claims)", "Redis Cluster, 3
	// masters with 1 replica each".
	Topology string
	// Findings are the settings that let a failover lose a claim
	// (SeverityRefuse) or that weaken the guarantee (SeverityWarning).
	Findings []Finding
}

// Safe reports whether no finding says a failover can lose an
// acknowledged claim.
func (r Replication) Safe() bool {
	for _, f := range r.Findings {
		if f.Severity == SeverityRefuse {
			return false
		}
	}
	return true
}

// ErrUnsafeReplication is matched (errors.Is) by the error [New] returns for
// a store whose replication can lose an acknowledged claim in a failover.
// The error is a [*ReplicationError] naming each setting and its fix.
var ErrUnsafeReplication = errors.New("idem: a failover of the store can lose acknowledged claims (asynchronous replication)")

// ReplicationError is New's refusal of a store whose replication can lose
// an acknowledged claim.
type ReplicationError struct {
	// Topology is [Replication.Topology] as the store described it.
	Topology string
	// Findings are the refusing findings (Severity SeverityRefuse).
	Findings []Finding
}

func (e *ReplicationError) Error() string {
	parts := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		parts[i] = f.String()
	}
	return "idem: asynchronous replication: a failover of the store (" + e.Topology +
		") can lose a claim it acknowledged, and the retries that follow would run the effect again: " +
		strings.Join(parts, "; ") + " (set Config.AllowAsyncReplication to run anyway)"
}

// Is matches ErrUnsafeReplication.
func (e *ReplicationError) Is(target error) bool { return target == ErrUnsafeReplication }

// checkReplication asks a [ReplicationChecker] store about its
// replication: warnings are logged, refusals refuse unless
// cfg.AllowAsyncReplication, and are then logged at error level. Every
// engine reports an [EventReplication] at start: Delta 1 when a failover
// cannot lose a claim (or the store has no replication to check), 0 when
// it started on an unsafe setup because it was told to. A check that
// cannot run refuses too, under the same override: an engine must not
// start on replication it cannot vouch for without being told to.
func checkReplication(ctx context.Context, store Store, cfg *Config) error {
	rc, ok := store.(ReplicationChecker)
	if !ok {
		cfg.Observer.Observe(ctx, Event{Kind: EventReplication, Delta: 1})
		return nil
	}
	rep, err := rc.CheckReplication(ctx)
	if err != nil {
		if !cfg.AllowAsyncReplication {
			return fmt.Errorf("idem: New: checking the store's replication: %w (set Config.AllowAsyncReplication to run without the check)", err)
		}
		cfg.Logger.Error("idem: the store's replication could not be checked; running because AllowAsyncReplication is set", "err", err)
		cfg.Observer.Observe(ctx, Event{Kind: EventReplication, Delta: 0, Err: err})
		return nil
	}
	var refuse []Finding
	for _, f := range rep.Findings {
		if f.Severity == SeverityRefuse {
			refuse = append(refuse, f)
			continue
		}
		cfg.Logger.Warn("idem: store replication", "topology", rep.Topology, "setting", f.Setting, "value", f.Value, "problem", f.Problem, "fix", f.Fix)
	}
	if len(refuse) == 0 {
		cfg.Observer.Observe(ctx, Event{Kind: EventReplication, Delta: 1})
		return nil
	}
	rerr := &ReplicationError{Topology: rep.Topology, Findings: refuse}
	if !cfg.AllowAsyncReplication {
		return rerr
	}
	for _, f := range refuse {
		cfg.Logger.Error("idem: RUNNING ON ASYNCHRONOUS REPLICATION (AllowAsyncReplication is set): a failover can lose acknowledged claims, and their retries run the effect again",
			"topology", rep.Topology, "setting", f.Setting, "value", f.Value, "problem", f.Problem, "fix", f.Fix)
	}
	cfg.Observer.Observe(ctx, Event{Kind: EventReplication, Delta: 0, Err: rerr})
	return nil
}

// startReplicationWatch reads the store's replication again every
// Config.ReplicationCheck until Close (see there).
func (e *Engine) startReplicationWatch() {
	rc, ok := e.store.(ReplicationChecker)
	if !ok || e.cfg.ReplicationCheck < 0 {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	e.replStop, e.replDone = stop, make(chan struct{})
	go e.replicationWatch(ctx, rc)
}

func (e *Engine) stopReplicationWatch() {
	if e.replStop != nil {
		e.replStop()
		<-e.replDone
	}
}

// replicationWatch is the loop of startReplicationWatch. It starts from
// "safe" (New refused an unsafe store unless told, and then said so) and
// logs each change; a check that cannot run changes nothing.
func (e *Engine) replicationWatch(ctx context.Context, rc ReplicationChecker) {
	defer close(e.replDone)
	t := time.NewTicker(e.cfg.ReplicationCheck)
	defer t.Stop()
	safe := !e.cfg.AllowAsyncReplication
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, min(e.cfg.ReplicationCheck, 30*time.Second))
		rep, err := rc.CheckReplication(cctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Logger.Warn("idem: re-reading the store's replication failed; the last judgement stands", "err", err)
			}
			continue
		}
		now := rep.Safe()
		switch {
		case now && !safe:
			e.cfg.Logger.Info("idem: the store's replication is safe again: a failover cannot lose an acknowledged claim", "topology", rep.Topology)
		case !now && safe:
			for _, f := range rep.Findings {
				if f.Severity == SeverityRefuse {
					e.cfg.Logger.Error("idem: THE STORE'S REPLICATION TURNED UNSAFE while the engine runs: a failover now can lose acknowledged claims",
						"topology", rep.Topology, "setting", f.Setting, "value", f.Value, "problem", f.Problem, "fix", f.Fix)
				}
			}
		}
		safe = now
		delta, eerr := 1, error(nil)
		if !now {
			delta, eerr = 0, &ReplicationError{Topology: rep.Topology, Findings: rep.Findings}
		}
		e.cfg.Observer.Observe(ctx, Event{Kind: EventReplication, Delta: delta, Err: eerr})
	}
}
