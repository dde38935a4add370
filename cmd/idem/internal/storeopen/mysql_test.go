package storeopen

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/testenv"
)

// portReadOnly is the loopback port of this package's own MariaDB
// (mysqlstore's tests use 13300–13389).
const portReadOnly = 13390

// TestOpenMySQLChecksReplication: the store a mysql:// DSN opens reads its
// replication, so idem.New — and the proxy and doctor through it — starts
// on the shared standalone server and refuses a read-only one (a replica,
// or a demoted primary) with ErrUnsafeReplication naming read_only.
func TestOpenMySQLChecksReplication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, mysqltest.URL(t, MySQLURL), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rc, ok := st.(idem.ReplicationChecker)
	if !ok {
		t.Fatalf("the mysql:// store (%T) does not check its replication", st)
	}
	rep, err := rc.CheckReplication(ctx)
	if err != nil || !rep.Safe() || len(rep.Findings) != 0 {
		t.Fatalf("standalone server: %+v, %v; want safe, no finding", rep, err)
	}
	if _, err := idem.New(st, idem.Config{}); err != nil {
		t.Fatalf("idem.New on the standalone server: %v", err)
	}

	ro := testenv.NewMariaDBServers(t).Start("readonly", portReadOnly, "--read-only=ON")
	dsn, err := MySQLURL(ro.DSN)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	_, err = idem.New(st2, idem.Config{})
	if !errors.Is(err, idem.ErrUnsafeReplication) || !strings.Contains(err.Error(), "read_only = ON") {
		t.Fatalf("idem.New on a read-only server = %v, want ErrUnsafeReplication naming read_only", err)
	}
}
