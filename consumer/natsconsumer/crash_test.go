package natsconsumer_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// crashRig is a fresh stream with its consumer "billing" and the files of
// the children that consume it.
type crashRig struct {
	*env
	crashtest.Files
	childEnv []string // more environment for the children
}

func newCrashRig(t *testing.T, ackWait time.Duration) *crashRig {
	t.Helper()
	e := newEnv(t, 0)
	e.consumer(t, ackWait)
	return &crashRig{env: e, Files: crashtest.NewFiles(t)}
}

// start starts a child in mode ("plain", "tx" or "pgtx"; see child).
func (r *crashRig) start(t *testing.T, mode, crash, crashKey string) *crashtest.Proc {
	t.Helper()
	env := append([]string{
		"IDEM_CHILD_NATS=" + testenv.NATS.URL(),
		"IDEM_CHILD_STREAM=" + r.name,
		"IDEM_CHILD_MODE=" + mode,
	}, r.ChildEnv(crash, crashKey)...)
	p := crashtest.Start(t, append(env, r.childEnv...))
	p.Stalled = func(t testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if c, err := r.js.Consumer(ctx, r.name, "billing"); err == nil {
			info, _ := c.Info(ctx)
			t.Logf("consumer: %+v", info)
		}
	}
	return p
}

func (r *crashRig) Publish(t *testing.T, key, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.js.Publish(ctx, r.prefix+".payments", []byte(body), jetstreamMsgID(key)); err != nil {
		t.Fatal(err)
	}
}

func (r *crashRig) Scope() string { return r.name + "/billing" }

func (r *crashRig) drained(t *testing.T) func() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := r.js.Consumer(ctx, r.name, "billing")
	if err != nil {
		t.Fatal(err)
	}
	return drained(t, cons)
}

// finish runs a well-behaved child in mode until every message is settled.
func (r *crashRig) finish(t *testing.T, mode string) {
	t.Helper()
	p := r.start(t, mode, "", "")
	p.Await(t, "READY")
	eventually(t, "all messages settled", r.drained(t))
	p.Kill()
}

// plainRig is a crashRig whose children run the file handler (mode
// "plain"): a crashtest.Rig.
type plainRig struct{ *crashRig }

func (r plainRig) Start(t *testing.T, crash, crashKey string) *crashtest.Proc {
	t.Helper()
	return r.start(t, "plain", crash, crashKey)
}

func (r plainRig) Finish(t *testing.T, _ []string) { r.finish(t, "plain") }

// A consumer killed at each phase of one message; after recovery every
// message's effect happened exactly once and its record is succeeded (the
// phases are told in crashtest.KillAtEachPhase).
func TestKillConsumerAtEachPhase(t *testing.T) {
	crashtest.KillAtEachPhase(t, func(t *testing.T) crashtest.Rig { return plainRig{newCrashRig(t, time.Second)} })
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
	keys := crashtest.PublishN(t, r, 40)
	midTx := 0
	for i := 0; i < 12; i++ {
		p := r.start(t, mode, "", "")
		p.Await(t, "READY")
		var last string
		for k := 1 + rand.IntN(3); k > 0; k-- {
			last = strings.TrimPrefix(p.Await(t, "INTX "), "INTX ")
		}
		p.Kill()
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
		// pgstore keeps a state as a one-byte code (its migration 0003).
		rows, err := st.Pool().Query(ctx, `SELECT k.key, coalesce(l.n, 0),
				CASE r.state WHEN 'p' THEN 'in_progress' WHEN 's' THEN 'succeeded' WHEN 'f' THEN 'failed' WHEN 'u' THEN 'unknown' ELSE '' END
			FROM unnest($1::text[]) AS k(key)
			LEFT JOIN (SELECT msg_key, count(*) AS n FROM `+ledger+` GROUP BY msg_key) l ON l.msg_key = k.key
			LEFT JOIN `+records+` r ON r.scope = $2 AND r.key = k.key`, keys, r.Scope())
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
	return r.LedgerState(t, r.Scope(), keys)
}
