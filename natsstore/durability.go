package natsstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
)

var (
	_ idem.DurabilityChecker  = (*Store)(nil)
	_ idem.ReplicationChecker = (*Store)(nil)
)

// MinReplicas is the fewest replicas a bucket must have for a claim to
// survive the loss of a server: see the package doc, "Durability".
const MinReplicas = 3

// MinServerVersion is the oldest nats-server the store runs a replicated
// bucket on: older servers let two conditional updates win at one
// revision of a replicated stream (nats-server issue #4320), which would
// let two attempts both believe they hold a key.
var MinServerVersion = [3]int{2, 10, 19}

// streamInfo reads the bucket's stream information.
func (s *Store) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("natsstore: stream %s: %w", s.stream, err)
	}
	return st.Info(ctx)
}

// CheckDurability reads the bucket's stream configuration and reports
// (SeverityRefuse) the settings that let it lose an acknowledged claim:
//   - fewer than MinReplicas replicas: JetStream acknowledges a write once
//     a majority of the replicas holds it, and each server writes its
//     files to disk on its own schedule (sync_interval, 2 minutes by
//     default); a bucket of one replica loses what its server had not
//     synced when that machine crashes, and loses everything with its
//     disk. Three replicas hold every acknowledged claim on two servers.
//   - memory storage: a restart of the servers forgets every record.
//   - a bucket TTL (MaxAge): the stream deletes each record a fixed time
//     after its last write, whatever its state (see the package doc,
//     "Retention").
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	info, err := s.streamInfo(ctx)
	if err != nil {
		return nil, err
	}
	return durabilityFindings(s.bucket, &info.Config), nil
}

// durabilityFindings judges a bucket's stream configuration.
func durabilityFindings(bucket string, c *jetstream.StreamConfig) []idem.Finding {
	var out []idem.Finding
	if c.Replicas < MinReplicas {
		out = append(out, idem.Finding{
			Setting: "replicas", Value: strconv.Itoa(c.Replicas),
			Problem: fmt.Sprintf("the bucket's records live on %d server(s), which acknowledge a write before syncing it to disk (sync_interval): "+
				"losing that machine loses acknowledged claims, and their retries run the effect again", c.Replicas),
			Fix: fmt.Sprintf("run a JetStream cluster of at least 3 servers and give the bucket %d replicas (nats stream edit KV_%s --replicas %d, or idem migrate with replicas=%d on a new bucket)",
				MinReplicas, bucket, MinReplicas, MinReplicas),
			Severity: idem.SeverityRefuse,
		})
	}
	if c.Storage == jetstream.MemoryStorage {
		out = append(out, idem.Finding{
			Setting: "storage", Value: "memory",
			Problem:  "the bucket is kept in memory: a restart of its servers forgets every record, and every retry of a finished key runs its effect again",
			Fix:      "create the bucket with file storage (idem migrate, storage=file) and move the records over; JetStream cannot change a stream's storage",
			Severity: idem.SeverityRefuse,
		})
	}
	if c.MaxAge != 0 {
		out = append(out, idem.Finding{
			Setting: "max_age (bucket TTL)", Value: c.MaxAge.String(),
			Problem:  "the stream deletes each record that long after its last write, whatever its state: unknown records (evidence) and outcomes still inside the retention window go, and their retries run the effect again",
			Fix:      fmt.Sprintf("remove the TTL (nats stream edit KV_%s --max-age 0): idem's sweeper removes expired records", bucket),
			Severity: idem.SeverityRefuse,
		})
	}
	return out
}

// CheckReplication describes the bucket's placement (its cluster, leader
// and replicas) and reports a replicated bucket on a server older than
// MinServerVersion (SeverityRefuse: conditional updates are not exclusive
// there), and replicas that are offline or behind (SeverityWarning: the
// bucket survives one server less until they catch up). The version read
// is that of the server the store's connection is on; a cluster runs one
// version on every server in ordinary operation, and an upgrade in
// progress is a moment to read them all (nats server list).
func (s *Store) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if err := s.check(ctx); err != nil {
		return idem.Replication{}, err
	}
	info, err := s.streamInfo(ctx)
	if err != nil {
		return idem.Replication{}, err
	}
	rep := idem.Replication{Topology: topology(info, s.nc.ConnectedServerVersion())}
	if f := versionFinding(s.nc.ConnectedServerVersion(), info.Config.Replicas); f != nil {
		rep.Findings = append(rep.Findings, *f)
	}
	if ci := info.Cluster; ci != nil {
		for _, p := range ci.Replicas {
			if p.Offline || !p.Current {
				rep.Findings = append(rep.Findings, idem.Finding{
					Setting: "replica " + p.Name, Value: replicaState(p),
					Problem:  "the bucket has one copy fewer than configured until this replica catches up: the loss of one more server makes it unavailable",
					Fix:      "bring the server back (nats server report jetstream shows it)",
					Severity: idem.SeverityWarning,
				})
			}
		}
	}
	return rep, nil
}

func replicaState(p *jetstream.PeerInfo) string {
	if p.Offline {
		return "offline"
	}
	return fmt.Sprintf("behind by %d operations", p.Lag)
}

// topology describes the bucket's placement in a few words.
func topology(info *jetstream.StreamInfo, version string) string {
	c := info.Cluster
	if c == nil || c.Name == "" {
		return fmt.Sprintf("single JetStream server %s, bucket %s with %d replica(s)", version, info.Config.Name, info.Config.Replicas)
	}
	names := make([]string, 0, len(c.Replicas))
	for _, p := range c.Replicas {
		names = append(names, p.Name)
	}
	return fmt.Sprintf("JetStream cluster %s (server %s), stream %s with %d replica(s): leader %s, followers [%s]",
		c.Name, version, info.Config.Name, info.Config.Replicas, c.Leader, strings.Join(names, " "))
}

// versionFinding refuses a replicated bucket on a server older than
// MinServerVersion; nil when the version is recent enough or the bucket
// has one replica. A version that does not parse is a warning.
func versionFinding(version string, replicas int) *idem.Finding {
	if replicas <= 1 {
		return nil
	}
	v, ok := parseVersion(version)
	if !ok {
		return &idem.Finding{Setting: "nats-server version", Value: version + " (unreadable)",
			Problem:  "idem cannot tell whether this server makes conditional updates of a replicated bucket exclusive (they are not before 2.10.19)",
			Fix:      "run nats-server 2.10.19 or newer",
			Severity: idem.SeverityWarning}
	}
	if !versionBelow(v, MinServerVersion) {
		return nil
	}
	return &idem.Finding{Setting: "nats-server version", Value: version,
		Problem:  "on a replicated bucket this server can accept two conditional updates at one revision (nats-server issue #4320): two attempts can both hold a key and both run its effect",
		Fix:      "upgrade every server of the cluster to nats-server 2.10.19 or newer",
		Severity: idem.SeverityRefuse}
}

// parseVersion reads "2.10.19" (a leading v and a -suffix allowed).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func versionBelow(v, min [3]int) bool {
	for i := range v {
		if v[i] != min[i] {
			return v[i] < min[i]
		}
	}
	return false
}
