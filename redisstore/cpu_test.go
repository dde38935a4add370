package redisstore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// TestCPUPerRequest measures CPU per first-time request, which stays
// meaningful on a machine shared with other load where wall-clock ratios
// do not. It runs requests through the engine over the store and through
// the raw two commands (SET NX + HSET, as idem bench's baseline), 16 at a
// time, and logs per request: client CPU (getrusage), server CPU
// (/proc/<IDEM_CPU_PID>/stat) and the server's command time (INFO
// commandstats), the minimum over IDEM_CPU_ROUNDS rounds.
//
// IDEM_CPU_REDIS=redis://host:port/db names a server of the measurement's
// own: it is FLUSHALLed between rounds. IDEM_CPU_SIDE=raw|idem|store runs
// one side (for -cpuprofile; store is the store's Claim and Finish without
// the engine), allocs counts allocations per request;
// IDEM_CPU_PUBOFF=1 runs the store with PubSubOff.
func TestCPUPerRequest(t *testing.T) {
	c := cpuClient(t)
	ctx := context.Background()
	cfg := Config{Prefix: "cpu"}
	if os.Getenv("IDEM_CPU_PUBOFF") != "" {
		cfg.PubSub = PubSubOff
	}
	s, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eng, err := idem.New(s, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}, AllowVolatileStore: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	payload := []byte(`{"id":"ch_0123456789","status":"succeeded","amount":1000}`)
	fp := idem.NewFingerprint([]byte("fp"))
	handler := func(context.Context, *idem.Attempt) ([]byte, error) { return payload, nil }
	var seq atomic.Int64
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	idemOp := func(n int64) error {
		_, err := eng.DoBytes(ctx, idem.Request{Scope: "bench", Key: idem.Key(run + "-" + strconv.FormatInt(n, 10)),
			Fingerprint: fp, Operation: "bench"}, handler)
		return err
	}
	rawOp := func(n int64) error {
		k := "cpuraw:" + run + "-" + strconv.FormatInt(n, 10)
		if err := c.SetNX(ctx, k+":lock", "attempt", time.Hour).Err(); err != nil {
			return err
		}
		now := time.Now().UnixMicro()
		return c.HSet(ctx, k+":rec", "state", "succeeded", "fence", 1, "fp", fp[:],
			"attempt", "attempt", "result", payload, "created", now, "completed", now, "expires", now+3600e6).Err()
	}
	// storeOp is idemOp without the engine: the store's Claim and Finish
	// as the engine calls them, to tell the engine's CPU from the store's.
	storeOp := func(n int64) error {
		now := time.Now()
		cp := idem.ClaimParams{Scope: "bench", Key: run + "-" + strconv.FormatInt(n, 10), Fingerprint: fp,
			AttemptID: "0123456789abcdef0123456789abcdef", Now: now, LeaseUntil: now.Add(time.Minute)}
		res, err := s.Claim(ctx, cp)
		if err != nil {
			return err
		}
		done := time.Now()
		_, err = s.Finish(ctx, idem.FinishParams{Scope: cp.Scope, Key: cp.Key, Fence: res.Record.Fence,
			AttemptID: cp.AttemptID, State: idem.StateSucceeded, Result: payload, CompletedAt: done,
			ExpiresAt: done.Add(24 * time.Hour), Claim: res.Record})
		return err
	}
	pid := os.Getenv("IDEM_CPU_PID")
	n := 20000
	if v := os.Getenv("IDEM_CPU_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	// simple sequential-batch measurement: each side runs n requests over 16 goroutines
	side := func(op func(int64) error) (cl, sv, cmd float64) {
		c0, s0, u0 := clientCPU(), serverCPU(pid), cmdUsec(ctx, c)
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := op(seq.Add(1)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		c1, s1, u1 := clientCPU(), serverCPU(pid), cmdUsec(ctx, c)
		f := float64(n)
		return float64(c1-c0) / f, float64(s1-s0) / f, (u1 - u0) / f
	}
	if os.Getenv("IDEM_CPU_SIDE") == "allocs" {
		ra := testing.AllocsPerRun(2000, func() { _ = rawOp(seq.Add(1)) })
		ia := testing.AllocsPerRun(2000, func() { _ = idemOp(seq.Add(1)) })
		sa := testing.AllocsPerRun(2000, func() { _ = storeOp(seq.Add(1)) })
		t.Logf("allocs/request: raw %.1f idem %.1f (store alone %.1f)", ra, ia, sa)
		return
	}
	if os.Getenv("IDEM_CPU_SIDE") == "raw" {
		rc, rs, ru := side(rawOp)
		t.Logf("raw only: client %.1fµs server %.1fµs cmd %.1fµs", rc, rs, ru)
		return
	}
	if os.Getenv("IDEM_CPU_SIDE") == "store" {
		sc, ss, su := side(storeOp)
		t.Logf("store only: client %.1fµs server %.1fµs cmd %.1fµs", sc, ss, su)
		return
	}
	if os.Getenv("IDEM_CPU_SIDE") == "idem" {
		ic, is, iu := side(idemOp)
		t.Logf("idem only: client %.1fµs server %.1fµs cmd %.1fµs", ic, is, iu)
		return
	}
	// Rounds alternate the sides on a flushed server (IDEM_CPU_REDIS must name a
	// server of the measurement's own); the minimum of each figure is the
	// least disturbed by other load on the machine.
	rounds := 6
	if v := os.Getenv("IDEM_CPU_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	minOf := func(m *[3]float64, a, b, c float64) {
		for i, v := range [3]float64{a, b, c} {
			if m[i] == 0 || v < m[i] {
				m[i] = v
			}
		}
	}
	var rawMin, idemMin [3]float64
	for range rounds {
		c.FlushAll(ctx)
		rc, rs, ru := side(rawOp)
		minOf(&rawMin, rc, rs, ru)
		c.FlushAll(ctx)
		ic, is, iu := side(idemOp)
		minOf(&idemMin, ic, is, iu)
	}
	t.Logf("min over %d rounds: raw client %.1fµs server %.1fµs cmd %.1fµs | idem client %.1fµs server %.1fµs cmd %.1fµs | raw/idem client %.2f server %.2f client+server %.2f",
		rounds, rawMin[0], rawMin[1], rawMin[2], idemMin[0], idemMin[1], idemMin[2],
		rawMin[0]/idemMin[0], rawMin[1]/idemMin[1], (rawMin[0]+rawMin[1])/(idemMin[0]+idemMin[1]))
}

// clientCPU is this process's user+system CPU in µs.
func clientCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Sec*1e6 + int64(ru.Utime.Usec) + ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)
}

// serverCPU is the server process's user+system CPU in µs (clock ticks of 10ms).
func serverCPU(pid string) int64 {
	if pid == "" {
		return 0
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 10000
}

// cmdUsec sums the usec of every command in INFO commandstats.
func cmdUsec(ctx context.Context, c *redis.Client) float64 {
	var total float64
	for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") {
		i := strings.Index(line, "usec=")
		if i < 0 || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		v := line[i+5:]
		v = v[:strings.IndexByte(v, ',')]
		f, _ := strconv.ParseFloat(v, 64)
		total += f
	}
	return total
}

// TestScriptCost (IDEM_CPU_REDIS as above: it is flushed) runs
// the finish script on fresh in_progress records, pipelined: with the claim
// as Finish sends it on a first-time request (the script compares the
// value once) and without it (the script decodes), each with and without
// the publish. It logs the server's usec per EVALSHA (INFO commandstats)
// and, with IDEM_CPU_PID, the server's CPU per EVALSHA, the minimum over
// the rounds.
func TestScriptCost(t *testing.T) {
	c := cpuClient(t)
	ctx := context.Background()
	s, err := New(c, Config{Prefix: "sc"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := os.Getenv("IDEM_CPU_PID")
	now := time.Now()
	const n, batch = 20000, 500
	attempt := "0123456789abcdef0123456789abcdef"
	result := []byte(`{"id":"ch_0123456789","status":"succeeded","amount":1000}`)
	perCall := func(withClaim bool, pub string) (usec, cpu float64) {
		c.FlushAll(ctx)
		sc := redis.NewScript(finishLua(pub))
		if err := sc.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		claims := make([]idem.Record, n)
		for b := 0; b < n; b += batch {
			pl := c.Pipeline()
			for i := b; i < b+batch; i++ {
				p := idem.ClaimParams{Scope: "s", Key: strconv.Itoa(i), AttemptID: attempt, Now: now,
					LeaseUntil: now.Add(time.Minute), Intent: []byte("{}")}
				pl.Set(ctx, s.recKey(p.Scope, p.Key), newClaimValue(&p), 0)
				claims[i] = idem.Record{Scope: p.Scope, Key: p.Key, State: idem.StateInProgress, Fence: 1,
					AttemptID: attempt, Intent: p.Intent, CreatedAt: p.Now, LeaseUntil: p.LeaseUntil}
			}
			if _, err := pl.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.ConfigResetStat(ctx)
		s0 := serverCPU(pid)
		for b := 0; b < n; b += batch {
			pl := c.Pipeline()
			cmds := make([]*redis.Cmd, 0, batch)
			for i := b; i < b+batch; i++ {
				fp := idem.FinishParams{Scope: "s", Key: strconv.Itoa(i), Fence: 1, AttemptID: attempt,
					State: idem.StateSucceeded, Result: result, CompletedAt: now, ExpiresAt: now.Add(time.Hour)}
				if withClaim {
					fp.Claim = claims[i]
				}
				fc := s.newFinishCall(&fp)
				cmds = append(cmds, pl.EvalSha(ctx, sc.Hash(), []string{fc.rec, fc.ch},
					[]byte(fc.exp), []byte(fc.val), []byte(fc.pxat)))
			}
			if _, err := pl.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if v, _ := cmds[0].Result(); (v == int64(1)) != withClaim {
				t.Fatalf("with claim %v: the script answered %v", withClaim, v)
			}
		}
		cpu = float64(serverCPU(pid)-s0) / n
		for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:") {
				v := line[strings.Index(line, "usec_per_call=")+len("usec_per_call="):]
				usec, _ = strconv.ParseFloat(v[:strings.IndexByte(v, ',')], 64)
			}
		}
		return usec, cpu
	}
	var mins [4][2]float64
	names := [4]string{"claim spublish", "claim none", "decode spublish", "decode none"}
	for range 4 {
		for i := range mins {
			u, cpu := perCall(i < 2, [2]string{"spublish", ""}[i%2])
			if mins[i][0] == 0 || u < mins[i][0] {
				mins[i][0] = u
			}
			if mins[i][1] == 0 || cpu < mins[i][1] {
				mins[i][1] = cpu
			}
		}
	}
	for i, m := range mins {
		t.Logf("finish, %-15s: min usec/call %.2f, server CPU/call %.2fµs", names[i], m[0], m[1])
	}
}

// cpuClient connects to the server IDEM_CPU_REDIS names (one the
// measurements may flush), or skips: these are measurement tools, not
// tests of a backend.
func cpuClient(t *testing.T) *redis.Client {
	t.Helper()
	u := os.Getenv("IDEM_CPU_REDIS")
	if u == "" {
		t.Skip("IDEM_CPU_REDIS not set")
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServerInstructions counts the server's instructions per command,
// which, unlike time, do not depend on the machine's other load. It needs
// a redis-server of its own running under callgrind, e.g.
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
//	  redis-server --port 6393 --save '' --appendonly no &
//
// with IDEM_CPU_REDIS naming it (it is flushed), IDEM_CPU_CALLGRIND its
// pid and IDEM_CPU_CALLGRIND_OUT its --callgrind-out-file (/tmp/cg.<pid>). For each command it zeroes the counts (callgrind_control -z),
// sends 2,000 of them in pipelines of 200 and dumps the counts, and logs
// the dump's total per command: the raw side's SET NX EX and 8-field
// HSET, the claim's SET NX GET, and the finish script on both its paths.
func TestServerInstructions(t *testing.T) {
	pid := os.Getenv("IDEM_CPU_CALLGRIND")
	if pid == "" {
		t.Skip("IDEM_CPU_CALLGRIND not set")
	}
	c := cpuClient(t)
	ctx := context.Background()
	s, err := New(c, Config{Prefix: "ir"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefix := os.Getenv("IDEM_CPU_CALLGRIND_OUT")
	now := time.Now()
	const n, batch = 2000, 200
	attempt := "0123456789abcdef0123456789abcdef"
	result := []byte(`{"id":"ch_0123456789","status":"succeeded","amount":1000}`)
	fpr := idem.NewFingerprint([]byte("fp"))
	ctl := func(args ...string) {
		if out, err := exec.Command("callgrind_control", append(args, pid)...).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control %v: %v %s", args, err, out)
		}
	}
	claimP := func(i int) idem.ClaimParams {
		return idem.ClaimParams{Scope: "bench", Key: strconv.Itoa(i), Fingerprint: fpr, AttemptID: attempt,
			Now: now, LeaseUntil: now.Add(time.Minute)}
	}
	finishP := func(i int, withClaim bool) idem.FinishParams {
		p := claimP(i)
		fp := idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: 1, AttemptID: attempt, State: idem.StateSucceeded,
			Result: result, CompletedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
		if withClaim {
			fp.Claim = idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: fpr, State: idem.StateInProgress, Fence: 1,
				AttemptID: attempt, CreatedAt: p.Now, LeaseUntil: p.LeaseUntil}
		}
		return fp
	}
	finish := func(withClaim bool) func(pl redis.Pipeliner, i int) {
		return func(pl redis.Pipeliner, i int) {
			fp := finishP(i, withClaim)
			fc := s.newFinishCall(&fp)
			pl.EvalSha(ctx, s.finish.Hash(), []string{fc.rec, fc.ch}, []byte(fc.exp), []byte(fc.val), []byte(fc.pxat))
		}
	}
	claim := func(pl redis.Pipeliner, i int) {
		p := claimP(i)
		pl.Do(ctx, "set", s.recKey(p.Scope, p.Key), newClaimValue(&p), "nx", "get")
	}
	cases := []struct {
		name         string
		claimed      bool // the records exist, claimed, before the commands run
		cmd          func(pl redis.Pipeliner, i int)
		wantFirstRes interface{}
	}{
		{"raw SET NX EX", false, func(pl redis.Pipeliner, i int) {
			pl.SetNX(ctx, "cpuraw:"+strconv.Itoa(i)+":lock", "attempt", time.Hour)
		}, true},
		{"raw HSET", false, func(pl redis.Pipeliner, i int) {
			us := now.UnixMicro()
			pl.HSet(ctx, "cpuraw:"+strconv.Itoa(i)+":rec", "state", "succeeded", "fence", 1, "fp", fpr[:],
				"attempt", "attempt", "result", result, "created", us, "completed", us, "expires", us+3600e6)
		}, int64(8)},
		{"claim SET NX GET", false, claim, nil},
		{"finish, claim compared", true, finish(true), int64(1)},
		{"finish, decoding", true, finish(false), nil},
	}
	for _, tc := range cases {
		c.FlushAll(ctx)
		if err := s.finish.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		if tc.claimed {
			pl := c.Pipeline()
			for i := range n {
				claim(pl, i)
			}
			_, _ = pl.Exec(ctx)
		}
		out := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "_"), ",", "")
		ctl("-z")
		var first redis.Cmder
		for b := 0; b < n; b += batch {
			pl := c.Pipeline()
			for i := b; i < b+batch; i++ {
				tc.cmd(pl, i)
			}
			cmds, err := pl.Exec(ctx)
			if err != nil && err != redis.Nil {
				t.Fatal(tc.name, err)
			}
			if first == nil {
				first = cmds[0]
			}
		}
		ctl("--dump=" + out)
		if tc.wantFirstRes != nil {
			var got interface{}
			switch c := first.(type) {
			case *redis.Cmd:
				got = c.Val()
			case *redis.BoolCmd:
				got = c.Val()
			case *redis.IntCmd:
				got = c.Val()
			}
			if got != tc.wantFirstRes {
				t.Fatalf("%s: first reply %v, want %v", tc.name, got, tc.wantFirstRes)
			}
		}
		t.Logf("%-24s %6.0f instructions/command", tc.name, float64(dumpTotal(t, prefix, out))/n)
	}
}

// dumpTotal returns the total instruction count of the newest callgrind
// dump (files prefix.N) triggered as name.
func dumpTotal(t *testing.T, prefix, name string) int64 {
	t.Helper()
	files, _ := filepath.Glob(prefix + ".*")
	var newest string
	var at time.Time
	var total int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "\ndesc: Trigger: dump "+name+"\n") {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil || (newest != "" && !fi.ModTime().After(at)) {
			continue
		}
		newest, at = f, fi.ModTime()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "summary:") || strings.HasPrefix(line, "totals:") {
				total, _ = strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				break
			}
		}
	}
	if newest == "" {
		t.Fatalf("no callgrind dump %s.* for %s", prefix, name)
	}
	return total
}
