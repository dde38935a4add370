package natsconsumer_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// proc is a running child consumer.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	js     jetstream.JetStream
	stream string
}

type crashRig struct {
	*env
	dir      string
	db       string
	effects  string
	childEnv []string // more environment for the children
}

func newCrashRig(t *testing.T, ackWait time.Duration) *crashRig {
	t.Helper()
	e := newEnv(t, 0)
	e.consumer(t, ackWait)
	dir := t.TempDir()
	return &crashRig{env: e, dir: dir, db: filepath.Join(dir, "idem.db"), effects: filepath.Join(dir, "effects.log")}
}

func (r *crashRig) start(t *testing.T, mode, crash, crashKey string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		"IDEM_CRASH_CHILD=1",
		"IDEM_CHILD_NATS="+testenv.NATS.URL(),
		"IDEM_CHILD_STREAM="+r.name,
		"IDEM_CHILD_DB="+r.db,
		"IDEM_CHILD_EFFECTS="+r.effects,
		"IDEM_CHILD_MODE="+mode,
		"IDEM_CHILD_CRASH="+crash,
		"IDEM_CHILD_CRASH_KEY="+crashKey,
		"IDEM_CHILD_LEASE=1s",
	)
	cmd.Env = append(cmd.Env, r.childEnv...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024), js: r.js, stream: r.name}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.kill)
	return p
}

// await returns the first line starting with prefix.
func (p *proc) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("child exited before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if c, err := p.js.Consumer(ctx, p.stream, "billing"); err == nil {
				info, _ := c.Info(ctx)
				t.Logf("consumer: %+v", info)
			}
			if os.Getenv("IDEM_DEBUG") != "" {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				time.Sleep(time.Second)
			}
			t.Fatalf("child never said %q", prefix)
		}
	}
}

// kill sends SIGKILL and reaps the child.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func (r *crashRig) publishN(t *testing.T, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("pay-%03d", i)
		r.publishOne(t, keys[i], fmt.Sprintf(`{"amount":%d}`, 100+i))
	}
	return keys
}

func (r *crashRig) publishOne(t *testing.T, key, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.js.Publish(ctx, r.prefix+".payments", []byte(body), jetstreamMsgID(key)); err != nil {
		t.Fatal(err)
	}
}

func (r *crashRig) drained(t *testing.T) func() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := r.js.Consumer(ctx, r.name, "billing")
	if err != nil {
		t.Fatal(err)
	}
	return drained(t, cons)
}

// finish runs a well-behaved child until every message is settled.
func (r *crashRig) finish(t *testing.T, mode string) {
	t.Helper()
	p := r.start(t, mode, "", "")
	p.await(t, "READY")
	eventually(t, "all messages settled", r.drained(t))
	p.kill()
}

func (r *crashRig) effectCounts(t *testing.T, keys []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, k := range keys {
		n, err := countLines(r.effects, k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

func (r *crashRig) store(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Path: r.db, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A consumer killed at each phase of one message; after recovery every
// message's effect happened exactly once and its record is succeeded.
func TestKillConsumerAtEachPhase(t *testing.T) {
	t.Parallel()
	for _, crash := range []string{crashAfterClaim, crashAfterEffect, crashAfterRecord} {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			r := newCrashRig(t, time.Second)
			keys := r.publishN(t, 5)
			victim := keys[2]
			p := r.start(t, "plain", crash, victim)
			p.await(t, map[string]string{crashAfterClaim: "CLAIMED", crashAfterEffect: "EFFECT", crashAfterRecord: "RECORDED"}[crash])
			p.kill()
			before := r.effectCounts(t, keys)[victim]
			if want := map[string]int{crashAfterClaim: 0, crashAfterEffect: 1, crashAfterRecord: 1}[crash]; before != want {
				t.Fatalf("victim effects at the kill: %d, want %d", before, want)
			}
			r.finish(t, "plain")
			for k, n := range r.effectCounts(t, keys) {
				if n != 1 {
					t.Errorf("%s: effect happened %d times, want 1", k, n)
				}
			}
			st := r.store(t)
			for _, k := range keys {
				rec, err := st.Get(context.Background(), r.name+"/billing", k)
				if err != nil || rec.State != idem.StateSucceeded {
					t.Errorf("%s: record %+v, %v", k, rec, err)
				}
			}
		})
	}
}

// Claim, effect (a ledger row) and record share one SQLite transaction. The
// consumer is killed inside the transaction again and again; after every
// kill, each message has both its ledger row and its record, or neither.
// At the end every message has exactly one ledger row.
func TestKillMidTransactionLeavesBothOrNeither(t *testing.T) {
	t.Parallel()
	r := newCrashRig(t, time.Second)
	r.killMidTx(t, "tx", r.txState)
}

// The same on PostgreSQL: claim, effect and record share one pgx
// transaction, in a scratch schema. A killed child's server backend rolls
// its transaction back when the connection drops; each check waits for the
// child's backends to be gone and reads ledger and records in one snapshot.
func TestKillMidTransactionLeavesBothOrNeitherPostgres(t *testing.T) {
	t.Parallel()
	r := newCrashRig(t, time.Second)
	r.killMidTx(t, "pgtx", r.usePostgres(t))
}

// killMidTx publishes 40 messages, then 12 times starts a child in mode,
// lets it commit a few messages and kills it while the handler holds its
// transaction open; after every kill, state must show each message with
// both its ledger row and a succeeded record, or neither. A last child then
// settles everything: one ledger row and one succeeded record per message.
func (r *crashRig) killMidTx(t *testing.T, mode string, state func(*testing.T, []string) (map[string]int, map[string]idem.State)) {
	t.Helper()
	keys := r.publishN(t, 40)
	midTx := 0
	for i := 0; i < 12; i++ {
		p := r.start(t, mode, "", "")
		p.await(t, "READY")
		var last string
		for k := 1 + rand.IntN(3); k > 0; k-- {
			last = strings.TrimPrefix(p.await(t, "INTX "), "INTX ")
		}
		p.kill()
		ledger, recs := state(t, keys)
		for _, k := range keys {
			if ledger[k] > 1 || (ledger[k] == 1) != (recs[k] == idem.StateSucceeded) || (ledger[k] == 0 && recs[k] != "") {
				t.Fatalf("iteration %d, %s: %d ledger rows, record %q: effect and record diverged", i, k, ledger[k], recs[k])
			}
		}
		if ledger[last] == 0 {
			midTx++ // the kill landed inside the transaction and rolled it back
		}
	}
	if midTx == 0 {
		t.Fatal("no kill landed inside a transaction; the test proves nothing")
	}
	r.finish(t, mode)
	ledger, recs := state(t, keys)
	for _, k := range keys {
		if ledger[k] != 1 || recs[k] != idem.StateSucceeded {
			t.Errorf("%s: %d ledger rows, record %q; want 1, succeeded", k, ledger[k], recs[k])
		}
	}
	t.Logf("%d of 12 kills landed inside a transaction", midTx)
}

// usePostgres points the rig's children at a scratch PostgreSQL schema
// holding the records table and the ledger (dropped when t ends), and
// returns the function that reads their state.
func (r *crashRig) usePostgres(t *testing.T) func(*testing.T, []string) (map[string]int, map[string]idem.State) {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ledger := pgx.Identifier{schema, "ledger"}.Sanitize()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE `+ledger+` (
		id bigserial PRIMARY KEY,
		msg_key text NOT NULL, -- deliberately not unique: idem, not the ledger, must prevent doubles
		amount integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// The children's connections carry an application_name of their own, so
	// that the parent can wait for a killed child's backends to end.
	app := "idemt-child-" + schema
	childDSN := dsn + " application_name=" + app
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		childDSN = dsn + sep + "application_name=" + app
	}
	r.childEnv = append(r.childEnv, "IDEM_CHILD_PG="+childDSN, "IDEM_CHILD_PG_SCHEMA="+schema)
	records := pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()
	return func(t *testing.T, keys []string) (map[string]int, map[string]idem.State) {
		t.Helper()
		eventually(t, "the killed child's backends gone", func() bool {
			var n int
			err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
			return err == nil && n == 0
		})
		// One statement, one snapshot: ledger rows and records are read
		// at the same instant.
		rows, err := st.Pool().Query(ctx, `SELECT k.key, coalesce(l.n, 0), coalesce(r.state, '')
			FROM unnest($1::text[]) AS k(key)
			LEFT JOIN (SELECT msg_key, count(*) AS n FROM `+ledger+` GROUP BY msg_key) l ON l.msg_key = k.key
			LEFT JOIN `+records+` r ON r.scope = $2 AND r.key = k.key`, keys, r.name+"/billing")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		ledger, recs := map[string]int{}, map[string]idem.State{}
		for rows.Next() {
			var k, state string
			var n int
			if err := rows.Scan(&k, &n, &state); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				ledger[k] = n
			}
			if state != "" {
				recs[k] = idem.State(state)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return ledger, recs
	}
}

// txState reads ledger rows per key and record states from the database.
func (r *crashRig) txState(t *testing.T, keys []string) (map[string]int, map[string]idem.State) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Path: r.db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ledger := map[string]int{}
	rows, err := st.DB().Query(`SELECT msg_key, count(*) FROM ledger GROUP BY msg_key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		ledger[k] = n
	}
	rows.Close()
	recs := map[string]idem.State{}
	for _, k := range keys {
		if rec, err := st.Get(context.Background(), r.name+"/billing", k); err == nil {
			recs[k] = rec.State
		}
	}
	return ledger, recs
}
