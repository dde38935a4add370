package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// A meter reads what the server has done so far, so that the difference
// over one side's slice of a cell (the sides take turns: only one runs at a
// time) is that side's cost: statements sent, server CPU, WAL written.
type meter interface {
	sample(ctx context.Context, side string) (usage, error)
	// close releases the meter's own connection.
	close()
}

// usage is a meter's reading, or the difference of two. A negative field
// was not measurable on this store.
type usage struct {
	stmts int64 // statements (Redis: commands) sent
	cpu   int64 // server CPU, µs
	wal   int64 // WAL (bytes)
}

var unmeasured = usage{stmts: -1, cpu: -1, wal: -1}

func (u usage) sub(v usage) usage {
	d := func(a, b int64) int64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a - b
	}
	return usage{stmts: d(u.stmts, v.stmts), cpu: d(u.cpu, v.cpu), wal: d(u.wal, v.wal)}
}

func (u *usage) add(v usage) {
	a := func(x *int64, y int64) {
		if *x < 0 || y < 0 {
			*x = -1
			return
		}
		*x += y
	}
	a(&u.stmts, v.stmts)
	a(&u.cpu, v.cpu)
	a(&u.wal, v.wal)
}

// perRequest is v over ops requests; nil when v was not measured.
func perRequest(v, ops int64) *float64 {
	if v < 0 || ops <= 0 {
		return nil
	}
	f := float64(v) / float64(ops)
	return &f
}

// stmtCounter is a pgx.QueryTracer counting the statements one pool sends
// (each statement of a batch counts).
type stmtCounter struct{ n atomic.Int64 }

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// pgMeter meters PostgreSQL: statements counted by each side's pool
// tracer; server CPU as the utime+stime, read from /proc, of the backends
// whose application_name starts with the run's scratch name (both sides'
// pools; the idle one adds nothing), which needs the server on this
// machine; WAL as pg_current_wal_lsn, which counts every client's writes.
// Its own connection has another application_name.
type pgMeter struct {
	conn       *pgx.Conn
	app        string // application_name prefix of the measured pools
	raw, idem  *stmtCounter
	cpuOK      bool // the backends' /proc entries are PostgreSQL's
	clockTicks int64
}

// newPGMeter connects the meter; dsn is the driver DSN.
func newPGMeter(ctx context.Context, dsn, app string, raw, idem *stmtCounter) (*pgMeter, error) {
	// Parsed as the pools parse it, so that their settings (pool_max_conns
	// and the other pool_ parameters) are taken off instead of being sent
	// to the server as unknown run-time parameters.
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg := pcfg.ConnConfig
	cfg.RuntimeParams["application_name"] = "idem bench meter"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m := &pgMeter{conn: conn, app: app, raw: raw, idem: idem, clockTicks: 100}
	// The server's CPU is readable when the meter's own backend is a
	// local PostgreSQL process.
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err == nil {
		_, err := procCPU(pid)
		m.cpuOK = err == nil
	}
	return m, nil
}

func (m *pgMeter) close() { _ = m.conn.Close(context.Background()) }

func (m *pgMeter) sample(ctx context.Context, side string) (usage, error) {
	u := unmeasured
	switch side {
	case sideRaw:
		u.stmts = m.raw.n.Load()
	default:
		u.stmts = m.idem.n.Load()
	}
	var pids []int32
	if err := m.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		ARRAY(SELECT pid FROM pg_stat_activity WHERE starts_with(application_name, $1))`, m.app).Scan(&u.wal, &pids); err != nil {
		return u, err
	}
	if m.cpuOK {
		u.cpu = 0
		for _, pid := range pids {
			c, err := procCPU(pid)
			if err != nil {
				// A backend gone since the query (a pool trimming):
				// its CPU is lost with it, a small undercount.
				continue
			}
			u.cpu += c
		}
	}
	return u, nil
}

// procCPU is the CPU time (µs) the local process pid has used, utime +
// stime from /proc/pid/stat, when it is a PostgreSQL process.
func procCPU(pid int32) (int64, error) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(string(comm), "postgres") {
		return 0, fmt.Errorf("process %d is %q, not PostgreSQL", pid, strings.TrimSpace(string(comm)))
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// USER_HZ is 100 on Linux.
	return (utime + stime) * int64(time.Second/time.Microsecond) / 100, nil
}

// redisMeter meters Redis with INFO: commands from commandstats (the
// meter's own INFO calls left out) and the server's CPU from used_cpu_sys
// and used_cpu_user. Both count every client of the server; Redis has no
// WAL (n/a).
type redisMeter struct{ c redis.UniversalClient }

func (m *redisMeter) close() {}

func (m *redisMeter) sample(ctx context.Context, _ string) (usage, error) {
	u := unmeasured
	var info string
	var err error
	switch c := m.c.(type) {
	case *redis.Client:
		info, err = c.Info(ctx, "commandstats", "cpu").Result()
	default:
		// Cluster: the commands spread over nodes; not metered.
		return u, nil
	}
	if err != nil {
		return u, err
	}
	u.stmts, u.cpu = parseRedisInfo(info)
	return u, nil
}

// parseRedisInfo sums the calls of every command but INFO, and the
// server's CPU (µs), from INFO commandstats and cpu; -1 for what is absent.
func parseRedisInfo(info string) (calls, cpu int64) {
	calls, cpu = -1, -1
	var cpuSec float64
	cpuSeen := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			if name == "cmdstat_info" {
				continue
			}
			for _, kv := range strings.Split(val, ",") {
				if n, ok := strings.CutPrefix(kv, "calls="); ok {
					if v, err := strconv.ParseInt(n, 10, 64); err == nil {
						calls = max(calls, 0) + v
					}
				}
			}
		case name == "used_cpu_sys" || name == "used_cpu_user":
			if v, err := strconv.ParseFloat(val, 64); err == nil {
				cpuSec += v
				cpuSeen++
			}
		}
	}
	if cpuSeen == 2 {
		cpu = int64(cpuSec * 1e6)
	}
	return calls, cpu
}
