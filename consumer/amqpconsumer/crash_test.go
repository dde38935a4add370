package amqpconsumer_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/sqlitestore"
)

// proc is a running child consumer.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

type crashRig struct {
	*rig
	dir     string
	db      string
	effects string
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	dir := t.TempDir()
	return &crashRig{rig: newRig(t), dir: dir, db: filepath.Join(dir, "idem.db"), effects: filepath.Join(dir, "effects.log")}
}

func (r *crashRig) start(t *testing.T, crash, crashKey string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		"IDEM_CRASH_CHILD=1",
		"IDEM_CHILD_AMQP="+testenv.AMQP.URL(),
		"IDEM_CHILD_QUEUE="+r.queue,
		"IDEM_CHILD_DB="+r.db,
		"IDEM_CHILD_EFFECTS="+r.effects,
		"IDEM_CHILD_CRASH="+crash,
		"IDEM_CHILD_CRASH_KEY="+crashKey,
		"IDEM_CHILD_LEASE=1s",
	)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024)}
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
			t.Fatalf("child never said %q", prefix)
		}
	}
}

// kill sends SIGKILL and reaps the child. Its connection dies with it, so
// RabbitMQ requeues whatever it had not acked.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// stop sends SIGTERM and waits for a clean exit: Run settles the deliveries
// in hand and the child closes its connection.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child did not stop cleanly: %v", err)
		}
	case <-time.After(15 * time.Second):
		p.kill()
		t.Fatal("child did not stop within 15 s of SIGTERM")
	}
}

func (r *crashRig) publishN(t *testing.T, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("pay-%03d", i)
		r.publish(t, keys[i], fmt.Sprintf(`{"amount":%d}`, 100+i))
	}
	return keys
}

// queueStat returns the queue's ready messages and consumers.
func (r *crashRig) queueStat(t *testing.T) (ready, consumers int) {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(r.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages, q.Consumers
}

// finish runs a well-behaved child until every message has a succeeded
// record and none is waiting, stops it gracefully, and checks that nothing
// came back to the queue: every message was acked.
func (r *crashRig) finish(t *testing.T, keys []string) {
	t.Helper()
	p := r.start(t, "", "")
	p.await(t, "READY")
	st := r.store(t)
	eventually(t, "all messages recorded succeeded", func() bool {
		for _, k := range keys {
			if rec, err := st.Get(context.Background(), r.queue, k); err != nil || rec.State != idem.StateSucceeded {
				return false
			}
		}
		ready, _ := r.queueStat(t)
		return ready == 0
	})
	p.stop(t)
	eventually(t, "the child's consumer gone", func() bool { _, c := r.queueStat(t); return c == 0 })
	if ready, _ := r.queueStat(t); ready != 0 {
		t.Fatalf("%d messages back in the queue after a clean stop; want all acked", ready)
	}
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

// A consumer process killed with SIGKILL at each phase of one message; its
// channel dies with it and RabbitMQ redelivers. After recovery every
// message's effect happened exactly once, its record is succeeded and it is
// acked:
//   - after the claim, before the effect: the redelivery waits out the 1 s
//     lease, the record turns unknown, the RecoverFunc finds no effect and
//     releases it, and the handler runs once — the message is not lost;
//   - after the effect, before the record: the RecoverFunc finds the effect
//     and records it succeeded — the effect is not repeated;
//   - after the record, before the ack: the redelivery is acked as a replay
//     without running.
func TestKillConsumerAtEachPhase(t *testing.T) {
	t.Parallel()
	for _, crash := range []string{crashAfterClaim, crashAfterEffect, crashAfterRecord} {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			r := newCrashRig(t)
			keys := r.publishN(t, 5)
			victim := keys[2]
			p := r.start(t, crash, victim)
			p.await(t, map[string]string{crashAfterClaim: "CLAIMED", crashAfterEffect: "EFFECT", crashAfterRecord: "RECORDED"}[crash])
			p.kill()
			before := r.effectCounts(t, keys)[victim]
			if want := map[string]int{crashAfterClaim: 0, crashAfterEffect: 1, crashAfterRecord: 1}[crash]; before != want {
				t.Fatalf("victim effects at the kill: %d, want %d", before, want)
			}
			r.finish(t, keys)
			for k, n := range r.effectCounts(t, keys) {
				if n != 1 {
					t.Errorf("%s: effect happened %d times, want 1", k, n)
				}
			}
			st := r.store(t)
			for _, k := range keys {
				rec, err := st.Get(context.Background(), r.queue, k)
				if err != nil || rec.State != idem.StateSucceeded {
					t.Errorf("%s: record %+v, %v", k, rec, err)
				}
			}
		})
	}
}
