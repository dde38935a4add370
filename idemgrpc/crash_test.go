package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"github.com/idemkit/idem/internal/crashtest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	if os.Getenv("IDEM_CRASH_CHILD") == "1" {
		crashtest.Main(m, crashChild) // exits
	}
	goleak.VerifyTestMain(m)
}

// crashChild is the server process of TestKillMidHandler: the test
// service behind idemgrpc on the SQLite file the parent names, over TCP
// loopback. Its Charge says EFFECT and blocks, to be killed there.
func crashChild() error {
	c := crashtest.FromEnv()
	ctx := context.Background()
	st, eng, err := c.Open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	defer eng.Close()
	ic, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{Scope: idemgrpc.GlobalScope})
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic))
	testpb.RegisterPaymentsServer(srv, &payments{hook: func(ctx context.Context, req *testpb.ChargeRequest, _ int64) (*testpb.ChargeResponse, error) {
		crashtest.Say("EFFECT %s", idemgrpc.AttemptFrom(ctx).Key)
		crashtest.Block()
		return nil, nil
	}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	crashtest.Say("LISTEN %s", lis.Addr())
	return srv.Serve(lis)
}

// A server killed with SIGKILL in the middle of a handler leaves the
// record in progress; once its lease passes, the retry with the same key
// is answered Aborted OUTCOME_UNKNOWN, and the handler never runs again.
func TestKillMidHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	t.Parallel()
	files := crashtest.NewFiles(t)
	p := crashtest.Start(t, files.ChildEnv("", ""))
	var addr string
	if _, err := fmt.Sscanf(p.Await(t, "LISTEN "), "LISTEN %s", &addr); err != nil {
		t.Fatal(err)
	}
	cic, err := idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(cic))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first := make(chan error, 1)
	go func() {
		_, err := testpb.NewPaymentsClient(conn).Charge(idemgrpc.WithKey(context.Background(), "crash-1"), chargeReq)
		first <- err
	}()
	p.Await(t, "EFFECT crash-1")
	p.Kill()
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Fatalf("the killed server's call: %v, want Unavailable", err)
	}

	// A new server on the same records.
	st := files.Store(t)
	eng, err := idem.New(st, idem.Config{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	svc := &payments{}
	e := serve(t, eng, svc, setup{cfg: idemgrpc.Config{Scope: idemgrpc.GlobalScope}})
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		// In flight until the dead attempt's lease passes.
		if _, _, last = e.charge(t, "crash-1", chargeReq); idemgrpc.Reason(last) != idemgrpc.ReasonInFlight {
			break
		}
	}
	if status.Code(last) != codes.Aborted || idemgrpc.Reason(last) != idemgrpc.ReasonOutcomeUnknown {
		t.Fatalf("retry after the kill: %v, want Aborted %s", last, idemgrpc.ReasonOutcomeUnknown)
	}
	if n := svc.calls.Load(); n != 0 {
		t.Fatalf("the retry ran the handler %d times: an unknown outcome must not be re-run", n)
	}
	rec, err := st.Get(context.Background(), "", "crash-1")
	if err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record %+v, %v; want unknown", rec, err)
	}
}
