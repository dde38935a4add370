package kafkaconsumer_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashtest"
)

// crashRig is a fresh kfake cluster and the files of the children that
// consume its topic in group billing.
type crashRig struct {
	*cluster
	crashtest.Files
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	return &crashRig{cluster: newCluster(t), Files: crashtest.NewFiles(t)}
}

// start starts a child in mode ("plain" or "tx"; see child).
func (r *crashRig) start(t *testing.T, mode, crash, crashKey string) *crashtest.Proc {
	t.Helper()
	env := append([]string{
		"IDEM_CHILD_KAFKA=" + strings.Join(r.addrs, ","),
		"IDEM_CHILD_MODE=" + mode,
	}, r.ChildEnv(crash, crashKey)...)
	p := crashtest.Start(t, env)
	p.Stalled = func(t testing.TB) { t.Logf("committed offsets: %v", r.committed(t, "billing")) }
	return p
}

// Publish produces every payment to partition 0, in order.
func (r *crashRig) Publish(t *testing.T, key, body string) { r.produce(t, 0, key, body) }

func (r *crashRig) Scope() string { return "billing/" + topic }

// finish runs a well-behaved child in mode until every record is
// committed.
func (r *crashRig) finish(t *testing.T, mode string) {
	t.Helper()
	p := r.start(t, mode, "", "")
	p.Await(t, "READY")
	eventually(t, "every record committed", r.drained(t, "billing"))
	p.Kill()
}

// plainRig is a crashRig whose children run the file handler: a
// crashtest.Rig.
type plainRig struct{ *crashRig }

func (r plainRig) Start(t *testing.T, crash, crashKey string) *crashtest.Proc {
	t.Helper()
	return r.start(t, "plain", crash, crashKey)
}

func (r plainRig) Finish(t *testing.T, _ []string) { r.finish(t, "plain") }

// A consumer process killed at each phase of one record (after the claim,
// after the effect, after the record and before the commit); the next
// member of the group receives the record again. After recovery every
// record's effect happened exactly once and its record is succeeded (the
// phases are told in crashtest.KillAtEachPhase).
func TestKillConsumerAtEachPhase(t *testing.T) {
	crashtest.KillAtEachPhase(t, func(t *testing.T) crashtest.Rig { return plainRig{newCrashRig(t)} })
}

// Claim, effect (a ledger row) and record share one SQLite transaction
// (consumer.NewTx). The consumer is killed inside the transaction again
// and again; after every kill each record has both its ledger row and its
// succeeded record, or neither. At the end every record has exactly one
// ledger row.
func TestKillMidTransactionLeavesBothOrNeither(t *testing.T) {
	t.Parallel()
	r := newCrashRig(t)
	keys := crashtest.PublishN(t, r, 30)
	midTx := 0
	const kills = 8
	for i := 0; i < kills; i++ {
		p := r.start(t, "tx", "", "")
		p.Await(t, "READY")
		var last string
		for k := 1 + rand.IntN(3); k > 0; k-- {
			last = strings.TrimPrefix(p.Await(t, "INTX "), "INTX ")
		}
		p.Kill()
		ledger, recs := r.txState(t, keys)
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
	r.finish(t, "tx")
	ledger, recs := r.txState(t, keys)
	for _, k := range keys {
		if ledger[k] != 1 || recs[k] != idem.StateSucceeded {
			t.Errorf("%s: %d ledger rows, record %q; want 1, succeeded", k, ledger[k], recs[k])
		}
	}
	t.Logf("%d of %d kills landed inside a transaction", midTx, kills)
}

// txState reads ledger rows per key and record states from the database.
func (r *crashRig) txState(t *testing.T, keys []string) (map[string]int, map[string]idem.State) {
	return r.LedgerState(t, r.Scope(), keys)
}

// The consume-process-produce loop (RunTransact): each record's effect
// (a line in the effects file) and a receipt produced in the Kafka
// transaction that commits its offset. The consumer is killed after the
// victim's outcome (with its receipt) is recorded and before the
// transaction commits: the transaction is aborted, the records are
// delivered again, and the victim replays — its receipt produced from the
// record, its effect not run again. Each key ends with one effect and one
// committed receipt.
func TestKillTransactAfterRecordBeforeCommit(t *testing.T) {
	t.Parallel()
	r := newCrashRig(t)
	keys := crashtest.PublishN(t, r, 5)
	victim := keys[2]
	p := r.start(t, "transact", crashtest.AfterRecord, victim)
	p.Await(t, "RECORDED")
	p.Kill()
	if n := r.EffectCounts(t, keys)[victim]; n != 1 {
		t.Fatalf("victim effects at the kill: %d, want 1", n)
	}
	if got := r.receipts(t); len(got) != 0 {
		t.Fatalf("receipts visible before any commit: %v", got)
	}
	r.finish(t, "transact")
	receipts := r.receipts(t)
	for k, n := range r.EffectCounts(t, keys) {
		if n != 1 || receipts[k] != 1 {
			t.Errorf("%s: %d effects, %d committed receipts; want 1, 1", k, n, receipts[k])
		}
	}
	if len(receipts) != len(keys) {
		t.Errorf("receipts: %v", receipts)
	}
}
