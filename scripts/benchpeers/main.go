//go:build ignore

// Command benchpeers measures idem against its closest Go peers,
// github.com/repenguin22/idemlease and github.com/fco-gt/gopotency, behind
// the same net/http server and handler, on the same PostgreSQL and Redis.
//
// It is not part of any idem module: the peers are not on the module
// proxy, so scripts/bench-peers copies this file into a throwaway module in
// a temporary directory, with replace lines to the peers' source
// directories and to this tree, and runs it there. Nothing of the peers'
// code is in this repository.
//
// Every side gets its own loopback net/http server around the same
// handler (read the 200-byte JSON body, answer 201 with a small JSON
// document) and a pool of --pool connections (pgxpool for idem,
// database/sql over pgx's stdlib for the peers, go-redis pools). A cell is
// one store, phase and concurrency; it runs --rounds rounds, each running
// every side for --duration in an order that alternates between rounds,
// and reports each side's median ops/s and the median of the per-round
// ratios idem ÷ peer (pairing the ratios within a round cancels most of
// what other load on the machine does to both).
//
// Phases: first (a new key per request: claim, handler, record) and
// replay (keys recorded before the cell, cycled: a stored response sent
// back without running the handler).
//
// Per side and cell it also prints, per request: statements sent (a pgx
// tracer on every side's connections, so the peers' statements are
// counted the same way), PostgreSQL server CPU (utime+stime of the side's
// own backends, read from /proc: the server must run on this machine), and
// WAL bytes (pg_current_wal_lsn before and after; on a server others write
// to, this includes their WAL).
package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/redisstore"

	"github.com/repenguin22/idemlease/httpidem"
	ilpg "github.com/repenguin22/idemlease/pgstore"
	ilredis "github.com/repenguin22/idemlease/redistore"

	gopotency "github.com/fco-gt/gopotency"
	gpkey "github.com/fco-gt/gopotency/key"
	gphttp "github.com/fco-gt/gopotency/middleware/http"
	gpredis "github.com/fco-gt/gopotency/storage/redis"
	gpsql "github.com/fco-gt/gopotency/storage/sql"
)

var (
	pgDSN    = flag.String("pg", envOr("IDEM_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN (empty: skip PostgreSQL)")
	redisURL = flag.String("redis", envOr("IDEM_TEST_REDIS", "redis://127.0.0.1:6379/0"), "Redis URL (empty: skip Redis)")
	concFlag = flag.String("concurrency", "1,16,64", "comma-separated concurrent callers")
	dur      = flag.Duration("duration", 4*time.Second, "how long each side runs in each round")
	rounds   = flag.Int("rounds", 3, "alternating rounds per cell")
	poolSize = flag.Int("pool", 16, "connections per side")
	phases   = flag.String("phases", "first,replay", "comma-separated phases: first, replay")
	stores   = flag.String("stores", "postgres,redis", "comma-separated stores: postgres, redis")
	sidesArg = flag.String("sides", "", "comma-separated side names to run (default all)")
	cpuProf  = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (pprof), e.g. with one side")
)

// wanted reports whether -sides names side (all sides when it is empty).
// Unwanted idem sides are not built: each holds --pool connections open,
// and PostgreSQL's default max_connections (100) does not fit them all.
func wanted(side string) bool {
	if *sidesArg == "" {
		return true
	}
	for _, n := range strings.Split(*sidesArg, ",") {
		if n == side {
			return true
		}
	}
	return false
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

var reqBody = func() []byte {
	b := []byte(`{"amount":5000,"currency":"EUR","customer":"cus_4711","description":"`)
	b = append(b, strings.Repeat("x", 200-len(b)-2)...)
	return append(b, `"}`...)
}()

var respBody = []byte(`{"id":"ch_1","status":"succeeded"}`)

// app is the handler every side wraps.
var app = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(respBody)
})

// counter is a pgx tracer counting the statements a side sends.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// side is one library behind its own server.
type side struct {
	name    string
	store   string
	url     string
	appName string // PostgreSQL application_name of its connections
	stmts   *counter
	closers []func()
	client  *http.Client
	seeded  []string // replay keys
}

func (s *side) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

func serve(s *side, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.closers = append(s.closers, func() { _ = srv.Close() })
	s.url = "http://" + ln.Addr().String() + "/charges"
	s.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256, DisableCompression: true}}
	return nil
}

var runID = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

const schema = "idem_peerbench"

func pgConfig(app string, c *counter) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(*pgDSN)
	if err != nil {
		return nil, err
	}
	cc.RuntimeParams["application_name"] = app
	cc.Tracer = c
	return cc, nil
}

func pgSides(ctx context.Context) ([]*side, error) {
	admin, err := pgx.Connect(ctx, *pgDSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	for _, q := range []string{
		"DROP SCHEMA IF EXISTS " + schema + " CASCADE",
		"CREATE SCHEMA " + schema,
		ilpg.Schema(schema + ".idemlease_records"),
		"CREATE TABLE " + schema + ".gopotency (key text PRIMARY KEY, data bytea NOT NULL, expires_at timestamptz NOT NULL)",
		"CREATE TABLE " + schema + ".gopotency_locks (key text PRIMARY KEY, expires_at timestamptz NOT NULL)",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	var out []*side
	idemSide := func(name string, cfg pgstore.Config, ecfg idem.Config) error {
		if !wanted(name) {
			return nil
		}
		s := &side{name: name, store: "postgres", appName: "peerbench-" + name, stmts: &counter{}}
		pc, err := pgxpool.ParseConfig(*pgDSN)
		if err != nil {
			return err
		}
		pc.MaxConns = int32(*poolSize)
		pc.MinConns = int32(*poolSize)
		pc.ConnConfig.RuntimeParams["application_name"] = s.appName
		pc.ConnConfig.Tracer = s.stmts
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return err
		}
		cfg.Schema, cfg.Table, cfg.Migrate = schema, strings.ReplaceAll(name, "-", "_"), true
		st, err := pgstore.New(ctx, pool, cfg)
		if err != nil {
			pool.Close()
			return err
		}
		eng, err := idem.New(st, ecfg)
		if err != nil {
			return err
		}
		mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
			Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
		if err != nil {
			return err
		}
		s.closers = append(s.closers, pool.Close, func() { _ = st.Close() }, func() { _ = eng.Close() })
		out = append(out, s)
		return serve(s, mw.Handler(app))
	}
	if err := idemSide("idem", pgstore.Config{}, idem.Config{}); err != nil {
		return out, err
	}
	// Group commit of claims only.
	if err := idemSide("idem-eager", pgstore.Config{Batch: pgstore.Batch{Eager: true}}, idem.Config{}); err != nil {
		return out, err
	}
	// Group commit of claims and outcomes alike: the library's default
	// (the "idem" side) spelt out, as the idem CLI configures it.
	if err := idemSide("idem-eagerfin", pgstore.Config{Batch: pgstore.Batch{Eager: true}, BatchFinishes: true}, idem.Config{}); err != nil {
		return out, err
	}
	// No group commit: every write its own transaction (the library's
	// default before 2026-12-04).
	if err := idemSide("idem-unbatched", pgstore.Config{Unbatched: true}, idem.Config{}); err != nil {
		return out, err
	}
	// The library's defaults but the replay cache (on by default): every
	// replay reads the store.
	if err := idemSide("idem-nocache", pgstore.Config{}, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}); err != nil {
		return out, err
	}
	// The library's defaults with outcomes committed without waiting for
	// their flush (pgstore.Config.AsyncOutcomes, an opt-in).
	if err := idemSide("idem-async", pgstore.Config{AsyncOutcomes: true}, idem.Config{}); err != nil {
		return out, err
	}
	if err := rawSide(ctx, &out); err != nil {
		return out, err
	}
	sqlDB := func(s *side) (*sql.DB, error) {
		cc, err := pgConfig(s.appName, s.stmts)
		if err != nil {
			return nil, err
		}
		db := stdlib.OpenDB(*cc)
		db.SetMaxOpenConns(*poolSize)
		db.SetMaxIdleConns(*poolSize)
		s.closers = append(s.closers, func() { _ = db.Close() })
		return db, db.PingContext(ctx)
	}
	{
		s := &side{name: "idemlease", store: "postgres", appName: "peerbench-idemlease", stmts: &counter{}}
		out = append(out, s)
		db, err := sqlDB(s)
		if err != nil {
			return out, err
		}
		st := ilpg.New(db, ilpg.Table(schema+".idemlease_records"))
		if err := serve(s, httpidem.New(st, httpidem.Require(true))(app)); err != nil {
			return out, err
		}
	}
	{
		s := &side{name: "gopotency", store: "postgres", appName: "peerbench-gopotency", stmts: &counter{}}
		out = append(out, s)
		db, err := sqlDB(s)
		if err != nil {
			return out, err
		}
		m, err := gopotency.NewManager(gopotency.Config{Storage: gpsql.NewSQLStorage(db, schema+".gopotency"),
			KeyStrategy: gpkey.HeaderBased("Idempotency-Key"), RequireKey: true})
		if err != nil {
			return out, err
		}
		if err := serve(s, gphttp.Idempotency(m)(app)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// rawSide adds "raw": the floor of an idempotency layer with a durable
// claim and a durable outcome, written by hand on pgx — an INSERT … ON
// CONFLICT DO NOTHING committed before the handler runs, the handler's
// answer kept in memory, an UPDATE committed before the answer is sent; a
// replay is that INSERT finding the key and a SELECT of the stored answer.
// No fingerprint, no lease, no intent, no waiters: what any library making
// the two commits in a row cannot go below.
func rawSide(ctx context.Context, out *[]*side) error {
	if !wanted("raw") {
		return nil
	}
	s := &side{name: "raw", store: "postgres", appName: "peerbench-raw", stmts: &counter{}}
	*out = append(*out, s)
	pc, err := pgxpool.ParseConfig(*pgDSN)
	if err != nil {
		return err
	}
	pc.MaxConns, pc.MinConns = int32(*poolSize), int32(*poolSize)
	pc.ConnConfig.RuntimeParams["application_name"] = s.appName
	pc.ConnConfig.Tracer = s.stmts
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, pool.Close)
	const table = schema + ".raw_records"
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (key text PRIMARY KEY, done boolean NOT NULL, status int, body bytea)"); err != nil {
		return err
	}
	return serve(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := r.Header.Get("Idempotency-Key")
		tag, err := pool.Exec(ctx, "INSERT INTO "+table+" (key, done) VALUES ($1, false) ON CONFLICT (key) DO NOTHING", key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if tag.RowsAffected() == 0 {
			var done bool
			var status *int32
			var body []byte
			if err := pool.QueryRow(ctx, "SELECT done, status, body FROM "+table+" WHERE key = $1", key).Scan(&done, &status, &body); err != nil || !done {
				http.Error(w, "in flight", http.StatusConflict)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(*status))
			_, _ = w.Write(body)
			return
		}
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, r)
		if _, err := pool.Exec(ctx, "UPDATE "+table+" SET done = true, status = $2, body = $3 WHERE key = $1", key, rec.Code, rec.Body.Bytes()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
}

func redisSides(ctx context.Context) ([]*side, error) {
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = *poolSize
	var out []*side
	for _, name := range []string{"idem", "idem-nocache", "idem-unpipelined"} {
		s := &side{name: name, store: "redis"}
		out = append(out, s)
		cl := redis.NewClient(opt)
		s.closers = append(s.closers, func() { _ = cl.Close() })
		st, err := redisstore.New(cl, redisstore.Config{Prefix: "peerbench:" + runID + ":" + name + ":", Unpipelined: name == "idem-unpipelined"})
		if err != nil {
			return out, err
		}
		// The peers do not check the server's persistence; idem refuses a
		// volatile one unless told: the same server for all three.
		cfg := idem.Config{TTL: 10 * time.Minute, AllowVolatileStore: true}
		if name == "idem-nocache" {
			cfg.ReplayCache.MaxBytes = -1 // every replay reads the store
		}
		eng, err := idem.New(st, cfg)
		if err != nil {
			return out, err
		}
		s.closers = append(s.closers, func() { _ = eng.Close() })
		mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
			Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
		if err != nil {
			return out, err
		}
		if err := serve(s, mw.Handler(app)); err != nil {
			return out, err
		}
	}
	{
		s := &side{name: "idemlease", store: "redis"}
		out = append(out, s)
		cl := redis.NewClient(opt)
		s.closers = append(s.closers, func() { _ = cl.Close() })
		st := ilredis.New(cl, ilredis.KeyPrefix("peerbench:"+runID+":idemlease:"))
		if err := serve(s, httpidem.New(st, httpidem.Require(true), httpidem.RecordTTL(10*time.Minute))(app)); err != nil {
			return out, err
		}
	}
	{
		s := &side{name: "gopotency", store: "redis"}
		out = append(out, s)
		host := opt.Addr
		st, err := gpredis.NewRedisStorage(ctx, host, opt.Password)
		if err != nil {
			return out, err
		}
		s.closers = append(s.closers, func() { _ = st.Close() })
		m, err := gopotency.NewManager(gopotency.Config{Storage: st, TTL: 10 * time.Minute,
			KeyStrategy: gpkey.HeaderBased("Idempotency-Key"), RequireKey: true})
		if err != nil {
			return out, err
		}
		if err := serve(s, gphttp.Idempotency(m)(app)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// do sends one request and checks the answer.
func do(ctx context.Context, s *side, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(reqBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: status %d: %.200s", s.name, resp.StatusCode, b)
	}
	return nil
}

// measure is one side's run in one round.
type measure struct {
	ops, stmts, cpuUS, wal, procCPUUS float64 // per second / per request
	errs                              int64
	firstErr                          error
}

// backendCPU is the CPU time (µs) of the backends whose application_name
// is app, read from /proc.
func backendCPU(ctx context.Context, admin *pgx.Conn, app string) (float64, error) {
	rows, err := admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return 0, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, err
	}
	var total float64
	tick := 100.0 // USER_HZ on Linux
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("server CPU: %w (is the server on this machine?)", err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		total += (u + s) / tick * 1e6
	}
	return total, nil
}

func walLSN(ctx context.Context, admin *pgx.Conn) (float64, error) {
	var n float64
	err := admin.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8").Scan(&n)
	return n, err
}

func procCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec)*1e6 + float64(ru.Utime.Usec+ru.Stime.Usec)
}

var seq atomic.Int64

func run(ctx context.Context, admin *pgx.Conn, s *side, phase string, conc int, d time.Duration) measure {
	var m measure
	var errMu sync.Mutex
	var n atomic.Int64
	var cpu0, wal0 float64
	var err error
	if admin != nil {
		if cpu0, err = backendCPU(ctx, admin, s.appName); err != nil {
			m.firstErr = err
		}
		wal0, _ = walLSN(ctx, admin)
	}
	var st0 int64
	if s.stmts != nil {
		st0 = s.stmts.n.Load()
	}
	p0 := procCPU()
	prefix := fmt.Sprintf("pb-%s-%s-%d-", runID, s.name, seq.Add(1))
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				var key string
				if phase == "replay" {
					key = s.seeded[(w*7919+i)%len(s.seeded)]
				} else {
					key = prefix + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				}
				if err := do(ctx, s, key); err != nil {
					errMu.Lock()
					if m.firstErr == nil {
						m.firstErr = err
					}
					m.errs++
					errMu.Unlock()
					continue
				}
				n.Add(1)
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	reqs := float64(n.Load())
	m.ops = reqs / el
	if reqs > 0 {
		m.procCPUUS = (procCPU() - p0) / reqs
		if s.stmts != nil {
			m.stmts = float64(s.stmts.n.Load()-st0) / reqs
		}
		if admin != nil {
			cpu1, _ := backendCPU(ctx, admin, s.appName)
			wal1, _ := walLSN(ctx, admin)
			m.cpuUS = (cpu1 - cpu0) / reqs
			m.wal = (wal1 - wal0) / reqs
		}
	}
	return m
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func main() {
	flag.Parse()
	ctx := context.Background()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "benchpeers: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	var concs []int
	for _, f := range strings.Split(*concFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "benchpeers: bad --concurrency %q\n", *concFlag)
			os.Exit(2)
		}
		concs = append(concs, n)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("# benchpeers %s: rounds=%d duration=%s pool=%d, load at start %s", time.Now().UTC().Format(time.RFC3339), *rounds, *dur, *poolSize, load)
	fail := false
	for _, store := range strings.Split(*stores, ",") {
		var sides []*side
		var err error
		var admin *pgx.Conn
		switch store {
		case "postgres":
			if *pgDSN == "" {
				continue
			}
			sides, err = pgSides(ctx)
			if err == nil {
				admin, err = pgx.Connect(ctx, *pgDSN)
			}
			if err == nil {
				var sc string
				_ = admin.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sc)
				fmt.Printf("# postgres: synchronous_commit=%s\n", sc)
			}
		case "redis":
			if *redisURL == "" {
				continue
			}
			sides, err = redisSides(ctx)
		default:
			err = fmt.Errorf("unknown store %q", store)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchpeers: %s: %v\n", store, err)
			for _, s := range sides {
				s.close()
			}
			os.Exit(1)
		}
		var active []*side
		for _, s := range sides {
			if wanted(s.name) {
				active = append(active, s)
			}
		}
		// Seed replay keys (not timed).
		for _, s := range active {
			for i := 0; i < 256; i++ {
				k := fmt.Sprintf("pb-%s-%s-seed-%d", runID, s.name, i)
				if err := do(ctx, s, k); err != nil {
					fmt.Fprintf(os.Stderr, "benchpeers: seeding %s/%s: %v\n", store, s.name, err)
					os.Exit(1)
				}
				s.seeded = append(s.seeded, k)
			}
		}
		for _, phase := range strings.Split(*phases, ",") {
			for _, c := range concs {
				res := map[string][]measure{}
				for r := 0; r < *rounds; r++ {
					order := append([]*side(nil), active...)
					if r%2 == 1 {
						for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
							order[i], order[j] = order[j], order[i]
						}
					}
					for _, s := range order {
						m := run(ctx, admin, s, phase, c, *dur)
						if m.errs > 0 || m.ops == 0 {
							fmt.Fprintf(os.Stderr, "benchpeers: %s %s c=%d %s: %d errors, first: %v\n", store, phase, c, s.name, m.errs, m.firstErr)
							fail = true
						}
						res[s.name] = append(res[s.name], m)
					}
				}
				report(store, phase, c, active, res)
			}
		}
		if admin != nil {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			admin.Close(ctx)
		}
		for _, s := range sides {
			s.close()
		}
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("# load at end %s", load)
	if fail {
		os.Exit(1)
	}
}

func report(store, phase string, c int, sides []*side, res map[string][]measure) {
	fmt.Printf("\n%s %s c=%d\n", store, phase, c)
	fmt.Printf("  %-11s %9s %9s %10s %10s %10s\n", "side", "ops/s", "stmts/req", "srvCPUµs", "WAL B/req", "procCPUµs")
	for _, s := range sides {
		ms := res[s.name]
		var ops, st, cpu, wal, pc []float64
		for _, m := range ms {
			ops = append(ops, m.ops)
			st = append(st, m.stmts)
			cpu = append(cpu, m.cpuUS)
			wal = append(wal, m.wal)
			pc = append(pc, m.procCPUUS)
		}
		na := func(v float64, ok bool, f string) string {
			if !ok {
				return "n/a"
			}
			return fmt.Sprintf(f, v)
		}
		pg := store == "postgres"
		fmt.Printf("  %-11s %9.0f %9s %10s %10s %10.0f\n", s.name, median(ops),
			na(median(st), pg, "%.2f"), na(median(cpu), pg, "%.0f"), na(median(wal), pg, "%.0f"), median(pc))
	}
	for _, a := range sides {
		if (!strings.HasPrefix(a.name, "idem") && a.name != "raw") || a.name == "idemlease" {
			continue
		}
		for _, b := range sides {
			if b.name == "idemlease" || b.name == "gopotency" || (b.name == "raw" && a.name != "raw") {
				var rs []float64
				for i := range res[a.name] {
					if i < len(res[b.name]) && res[b.name][i].ops > 0 {
						rs = append(rs, res[a.name][i].ops/res[b.name][i].ops)
					}
				}
				strs := make([]string, len(rs))
				for i, r := range rs {
					strs[i] = fmt.Sprintf("%.2f", r)
				}
				fmt.Printf("  ratio %s ÷ %s: %.2f (rounds %s)\n", a.name, b.name, median(rs), strings.Join(strs, " "))
			}
		}
	}
}
