package sqlitestore

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Every writing statement lets SQLite's automatic checkpoint run, so the
// WAL is written in place instead of growing by every commit. With
// wal_autocheckpoint at 1 page each commit is checkpointed and the next
// one restarts the WAL from its start: the file never holds more than a
// few commits. A write whose autocommit ended in sqlite3_reset (a
// RETURNING row read with QueryRow) skips the checkpoint, and a run of
// such writes grows the file by a commit each.
func TestWritesLetTheWALBeCheckpointed(t *testing.T) {
	path := tempPath(t)
	s, err := Open(context.Background(), path, Config{Migrate: true, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if _, err := s.DB().ExecContext(ctx, `PRAGMA wal_autocheckpoint = 1`); err != nil {
		t.Fatal(err)
	}
	var page int64
	if err := s.DB().QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil {
		t.Fatal(err)
	}
	const n = 40
	// A few commits (the largest, the migrations', is about a dozen
	// frames); far below n commits of several frames each.
	limit := 32 + 24*(page+24)
	walWithin := func(phase string) {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > limit {
			t.Fatalf("after %d %s: WAL is %d bytes (> %d): those commits were not checkpointed", n, phase, fi.Size(), limit)
		}
	}

	recs := make([]idem.Record, n)
	for i := range recs {
		recs[i] = mustClaim(t, s, claimParams("k"+strconv.Itoa(i), "a1")).Record
	}
	walWithin("claims (INSERT … RETURNING)")
	for i, r := range recs {
		recs[i] = *mustFinish(t, s, finishParams(r, idem.StateSucceeded, "ok"))
	}
	walWithin("finishes (UPDATE … RETURNING)")
	for i := range n {
		c := mustClaim(t, s, claimParams("hinted"+strconv.Itoa(i), "a1")).Record
		p := finishParams(c, idem.StateSucceeded, "ok")
		p.Claim = c
		mustFinish(t, s, p)
	}
	walWithin("claims and finishes given the claim (plain UPDATE)")
	for i, r := range recs {
		p := claimParams(r.Key, "a2")
		p.Now = r.ExpiresAt.Add(time.Second)
		p.LeaseUntil = p.Now.Add(time.Minute)
		res := mustClaim(t, s, p)
		if !res.Claimed || res.Record.Fence != 2 {
			t.Fatalf("re-claim of expired %s = %+v", r.Key, res)
		}
		recs[i] = res.Record
	}
	walWithin("re-claims of expired records (UPDATE … RETURNING)")
	for _, r := range recs {
		if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence,
			From: []idem.State{idem.StateInProgress}, To: idem.StateFailed, AttemptID: "recon",
			Now: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatalf("resolve %s: %v", r.Key, err)
		}
	}
	walWithin("resolves (UPDATE … RETURNING)")
}
