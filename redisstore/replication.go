package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

var _ idem.ReplicationChecker = (*Store)(nil)

// CheckReplication reads how the store's Redis replicates and judges
// whether a failover can lose a claim the store acknowledged:
//
//   - the server idem writes to must be a primary: a replica (ROLE
//     slave) is refused outright;
//   - a primary with replicas (INFO replication; on every master of a
//     Cluster; for a primary behind Sentinel, also the replicas the
//     Sentinels know, see Config.Sentinel) is refused unless claims wait
//     for every replica: Redis replication is asynchronous, and Sentinel
//     or the Cluster may promote a replica that never received a claim
//     the primary acknowledged. Config.Wait with Replicas AllReplicas
//     is safe; a fixed count below the replicas connected is refused; a
//     count equal to them is a warning (the store refuses every claim
//     once a failover leaves fewer);
//   - fewer replicas connected than the wait needs is a warning: claims
//     fail closed until they are back;
//   - a replica Sentinel knows but that is not connected to the primary
//     is a warning: claims made while it is away are not on it.
//
// A primary without replicas has nothing a failover could lose: no
// finding (CheckDurability covers its restarts). A server that refuses
// CONFIG GET gives a warning that min-replicas-to-write could not be
// read. An error means INFO could not be read at all.
func (s *Store) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if err := s.check(); err != nil {
		return idem.Replication{}, err
	}
	var nodes []nodeRepl
	if s.cluster == nil {
		n, err := readNodeRepl(ctx, s.client, "")
		if err != nil {
			return idem.Replication{}, err
		}
		nodes = append(nodes, n)
	} else {
		var mu sync.Mutex
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n, err := readNodeRepl(ctx, c, c.Options().Addr)
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return err
		})
		if err != nil {
			return idem.Replication{}, err
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].addr < nodes[j].addr })
	}
	var sv *sentinelView
	if s.sentinel != nil {
		v, err := readSentinel(ctx, s.sentinel)
		if err != nil {
			return idem.Replication{}, err
		}
		sv = &v
	}
	return judgeReplication(s.cluster != nil, nodes, sv, s.wait), nil
}

// nodeRepl is what one primary (or the server a standalone client talks
// to) says about its replication.
type nodeRepl struct {
	addr     string // the node's address in a Cluster; "" otherwise
	role     string // "master" or "slave"
	replicas []replicaInfo
	// minToWrite and minMaxLag are min-replicas-to-write and
	// min-replicas-max-lag; configErr is set when CONFIG GET was refused.
	minToWrite, minMaxLag int
	configErr             string
}

// replicaInfo is one slaveN line of INFO replication.
type replicaInfo struct {
	addr, state string
	offset, lag int64
}

// online counts the replicas in state online: those WAIT counts.
func (n *nodeRepl) online() int {
	c := 0
	for _, r := range n.replicas {
		if r.state == "online" {
			c++
		}
	}
	return c
}

// readNodeRepl reads INFO replication and the min-replicas settings of
// the server c talks to.
func readNodeRepl(ctx context.Context, c redis.Cmdable, addr string) (nodeRepl, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nodeRepl{}, fmt.Errorf("redisstore: INFO replication%s: %w", atNode(addr), err)
	}
	n := parseInfoReplication(info)
	n.addr = addr
	cfg, err := c.ConfigGet(ctx, "min-replicas-*").Result()
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr):
		n.configErr = rerr.Error()
	case err != nil:
		return nodeRepl{}, fmt.Errorf("redisstore: CONFIG GET min-replicas-*%s: %w", atNode(addr), err)
	default:
		n.minToWrite, _ = strconv.Atoi(cfg["min-replicas-to-write"])
		n.minMaxLag, _ = strconv.Atoi(cfg["min-replicas-max-lag"])
	}
	return n, nil
}

func atNode(addr string) string {
	if addr == "" {
		return ""
	}
	return " on " + addr
}

// parseInfoReplication reads the role and the replicas of INFO
// replication's text.
func parseInfoReplication(info string) nodeRepl {
	var n nodeRepl
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "role":
			n.role = v
		case strings.HasPrefix(k, "slave") && strings.HasPrefix(v, "ip="):
			var r replicaInfo
			var ip, port string
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				switch fk {
				case "ip":
					ip = fv
				case "port":
					port = fv
				case "state":
					r.state = fv
				case "offset":
					r.offset, _ = strconv.ParseInt(fv, 10, 64)
				case "lag":
					r.lag, _ = strconv.ParseInt(fv, 10, 64)
				}
			}
			r.addr = ip + ":" + port
			n.replicas = append(n.replicas, r)
		}
	}
	return n
}

// sentinelView is what the Sentinels say about the store's master.
type sentinelView struct {
	master    string // the master's name
	addr      string // its address, as the Sentinels know it
	sentinels int    // Sentinels watching it (the one asked included)
	quorum    int
	replicas  []sentinelReplica
}

// sentinelReplica is one replica as SENTINEL REPLICAS lists it.
type sentinelReplica struct {
	addr     string
	flags    string // "slave", "slave,s_down,disconnected", …
	link     string // master-link-status: ok or err
	priority int    // replica-priority; 0 is never promoted
}

// down reports whether the replica is away from the master: Sentinel
// sees it down, or its link to the master is down.
func (r sentinelReplica) down() bool {
	return r.link != "ok" || strings.Contains(r.flags, "s_down") || strings.Contains(r.flags, "disconnected")
}

// readSentinel asks the Sentinels of fo, in turn, about fo.MasterName
// until one answers.
func readSentinel(ctx context.Context, fo *redis.FailoverOptions) (sentinelView, error) {
	var errs []error
	for _, addr := range fo.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: fo.SentinelUsername, Password: fo.SentinelPassword,
			TLSConfig: fo.TLSConfig, Dialer: fo.Dialer, DialTimeout: fo.DialTimeout,
			ReadTimeout: fo.ReadTimeout, WriteTimeout: fo.WriteTimeout, MaxRetries: -1,
		})
		v, err := askSentinel(ctx, sc, fo.MasterName)
		sc.Close()
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return sentinelView{}, fmt.Errorf("redisstore: no Sentinel answered about master %q: %w", fo.MasterName, errors.Join(errs...))
}

func askSentinel(ctx context.Context, sc *redis.SentinelClient, name string) (sentinelView, error) {
	m, err := sc.Master(ctx, name).Result()
	if err != nil {
		return sentinelView{}, err
	}
	v := sentinelView{master: name, addr: m["ip"] + ":" + m["port"]}
	others, _ := strconv.Atoi(m["num-other-sentinels"])
	v.sentinels = others + 1
	v.quorum, _ = strconv.Atoi(m["quorum"])
	reps, err := sc.Replicas(ctx, name).Result()
	if err != nil {
		return sentinelView{}, err
	}
	for _, r := range reps {
		p := r["replica-priority"]
		if p == "" {
			p = r["slave-priority"]
		}
		pr, err := strconv.Atoi(p)
		if err != nil {
			pr = 100 // Redis's default
		}
		v.replicas = append(v.replicas, sentinelReplica{addr: r["ip"] + ":" + r["port"], flags: r["flags"], link: r["master-link-status"], priority: pr})
	}
	return v, nil
}

// waitTarget is how many replicas claims wait for: AllReplicas, a count,
// or 0 when they do not wait for replicas at all. WAITAOF's replicas
// count as waited for: they have the claim on disk.
func waitTarget(w *WaitConfig) int {
	if w == nil {
		return 0
	}
	if w.Replicas == AllReplicas {
		return AllReplicas
	}
	return max(w.Replicas, w.AOFReplicas)
}

// judgeReplication turns what the nodes (and the Sentinels) said into a
// topology and findings, given the wait claims make.
func judgeReplication(cluster bool, nodes []nodeRepl, sv *sentinelView, w *WaitConfig) idem.Replication {
	var out []idem.Finding
	promoter := "an operator or a failover tool"
	switch {
	case cluster:
		promoter = "the Cluster"
	case sv != nil:
		promoter = "Sentinel"
	}
	wt := waitTarget(w)
	for i := range nodes {
		out = append(out, judgeNode(&nodes[i], cluster, sv, w, wt, promoter)...)
	}
	return idem.Replication{Topology: topology(cluster, nodes, sv, w), Findings: out}
}

// judgeNode judges one primary.
func judgeNode(n *nodeRepl, cluster bool, sv *sentinelView, w *WaitConfig, wt int, promoter string) []idem.Finding {
	at := ""
	if cluster {
		at = n.addr + ": "
	}
	if n.role != "master" {
		return []idem.Finding{{
			Setting: "role", Value: at + n.role,
			Problem:  "the store's connection goes to a replica: it refuses claims (READONLY), and whatever it holds may lag its primary",
			Fix:      "point the DSN at the primary, or at the Sentinels (redis+sentinel://host:port,…/0?master=NAME) so the client follows failovers",
			Severity: idem.SeverityRefuse,
		}}
	}
	online := n.online()
	replicas := max(online, len(n.replicas))
	var away []string // replicas Sentinel knows that are not with the primary
	if sv != nil && !cluster {
		for _, r := range sv.replicas {
			if r.down() && r.priority != 0 {
				away = append(away, r.addr)
			}
		}
		replicas = max(replicas, len(sv.replicas))
	}
	var out []idem.Finding
	if n.configErr != "" && replicas > 0 {
		out = append(out, idem.Finding{
			Setting: "CONFIG", Value: at + "unreadable",
			Problem:  fmt.Sprintf("the server refuses CONFIG GET (%s), so idem cannot read min-replicas-to-write", n.configErr),
			Fix:      "allow CONFIG GET for idem's user (ACL: +config|get), or confirm the setting with the provider",
			Severity: idem.SeverityWarning,
		})
	}
	if replicas == 0 {
		if wt == AllReplicas && w.MinReplicas > 0 || wt > 0 {
			out = append(out, idem.Finding{Setting: "wait_replicas", Value: fmt.Sprintf("%s%s (no replica connected)", at, waitPhrase(w)),
				Problem:  "claims wait for replicas and there is none: every claim fails closed (503)",
				Fix:      "start the replicas, or leave wait_replicas unset on a server that has none",
				Severity: idem.SeverityWarning})
		}
		return out
	}
	lossy := "asynchronous replication: " + promoter + " can promote a replica that never received a claim the primary acknowledged, and the retries that follow run the effect again"
	if n.minToWrite > 0 {
		lossy += fmt.Sprintf(" (min-replicas-to-write %d makes the primary refuse writes without replicas in reach, but does not make a write wait for one)", n.minToWrite)
	}
	fix := "wait_replicas=all in the DSN (Config.Wait = &redisstore.WaitConfig{Replicas: redisstore.AllReplicas}): each claim waits until every connected replica, and at least min_replicas, acknowledged it, and fails closed (503, the effect not run) otherwise"
	switch {
	case wt == 0:
		out = append(out, idem.Finding{Setting: "wait_replicas", Value: fmt.Sprintf("%snone (%s)", at, plural(replicas, "replica")),
			Problem: lossy, Fix: fix, Severity: idem.SeverityRefuse})
	case wt == AllReplicas:
		if online < w.MinReplicas {
			out = append(out, idem.Finding{Setting: "min_replicas", Value: fmt.Sprintf("%s%d (%d connected)", at, w.MinReplicas, online),
				Problem:  "fewer replicas are connected than every claim must reach: claims fail closed (503) until they are back",
				Fix:      "bring the replicas back (or, accepting that, lower min_replicas)",
				Severity: idem.SeverityWarning})
		}
	case wt < online:
		out = append(out, idem.Finding{Setting: "wait_replicas", Value: fmt.Sprintf("%s%d of %d", at, wt, online),
			Problem: "asynchronous replication: claims wait for " + strconv.Itoa(wt) + " of the " + strconv.Itoa(online) +
				" replicas, and " + promoter + " can promote one that had not acknowledged (" + choiceRule(cluster) + "); the retries that follow run the effect again",
			Fix: fix, Severity: idem.SeverityRefuse})
	case wt > online:
		out = append(out, idem.Finding{Setting: "wait_replicas", Value: fmt.Sprintf("%s%d (%d connected)", at, wt, online),
			Problem:  "claims wait for more replicas than are connected: every claim fails closed (503)",
			Fix:      "wait_replicas=all (every connected replica, at least min_replicas), or bring the replicas back",
			Severity: idem.SeverityWarning})
	default:
		out = append(out, idem.Finding{Setting: "wait_replicas", Value: fmt.Sprintf("%s%d (= the replicas connected)", at, wt),
			Problem:  "safe today, but a failover that leaves fewer replicas makes every claim fail (503) until a replica is added",
			Fix:      "wait_replicas=all with min_replicas: it waits for every replica connected and stays writable while min_replicas are",
			Severity: idem.SeverityWarning})
	}
	if len(away) > 0 && wt != 0 {
		out = append(out, idem.Finding{Setting: "replicas", Value: fmt.Sprintf("%s%s away from the primary", at, strings.Join(away, ", ")),
			Problem:  "Sentinel knows a replica that is not connected to the primary: claims made while it is away are not on it, and Sentinel may still promote it if the primary dies before it has caught up",
			Fix:      "repair its link to the primary; a replica that must never be promoted gets replica-priority 0",
			Severity: idem.SeverityWarning})
	}
	return out
}

// choiceRule says how the promoter picks the replica to promote.
func choiceRule(cluster bool) string {
	if cluster {
		return "the replicas elect one, the best replication offset first"
	}
	return "Sentinel picks by replica-priority, then replication offset"
}

// topology describes the setup in a few words.
func topology(cluster bool, nodes []nodeRepl, sv *sentinelView, w *WaitConfig) string {
	waits := " (" + waitPhrase(w) + ")"
	if cluster {
		counts := make([]string, len(nodes))
		same, total := true, 0
		for i := range nodes {
			c := nodes[i].online()
			counts[i] = strconv.Itoa(c)
			total += c
			same = same && c == nodes[0].online()
		}
		t := "Redis Cluster: " + plural(len(nodes), "master")
		switch {
		case total == 0:
			return t + ", no replicas"
		case same:
			return t + ", " + plural(nodes[0].online(), "replica") + " each" + waits
		}
		return t + ", replicas " + strings.Join(counts, "/") + waits
	}
	if len(nodes) != 1 {
		return "Redis"
	}
	n := &nodes[0]
	if n.role != "master" {
		return "a Redis replica (role " + n.role + ")"
	}
	head := "Redis primary"
	replicas := n.online()
	if sv != nil {
		head = fmt.Sprintf("Redis primary %q (%s, quorum %d)", sv.master, plural(sv.sentinels, "Sentinel"), sv.quorum)
		if len(sv.replicas) > replicas {
			return fmt.Sprintf("%s with %s, %d connected%s", head, plural(len(sv.replicas), "replica"), replicas, waits)
		}
	}
	if replicas == 0 {
		if sv == nil {
			return "standalone Redis primary, no replica"
		}
		return head + ", no replica"
	}
	return head + " with " + plural(replicas, "replica") + waits
}

// waitPhrase says what claims wait for.
func waitPhrase(w *WaitConfig) string {
	switch wt := waitTarget(w); wt {
	case 0:
		return "claims do not wait for replicas"
	case AllReplicas:
		return fmt.Sprintf("claims wait for all, at least %d", w.MinReplicas)
	default:
		return "claims wait for " + strconv.Itoa(wt)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
