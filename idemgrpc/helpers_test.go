package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqlitestore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

const chargeMethod = "/idem.test.v1.Payments/Charge"

// storeCase opens a fresh, isolated store of one backend.
type storeCase struct {
	name string
	open func(t *testing.T) idem.Store
}

func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(t *testing.T) idem.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"sqlite", func(t *testing.T) idem.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), sqlitestore.Config{Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}

// forEachStore runs f against every store.
func forEachStore(t *testing.T, f func(t *testing.T, open func(t *testing.T) idem.Store)) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			f(t, sc.open)
		})
	}
}

// payments is the test service. Its Charge counts calls and answers
// through hook when set.
type payments struct {
	testpb.UnimplementedPaymentsServer
	calls atomic.Int64
	hook  func(ctx context.Context, req *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error)
}

func (p *payments) Charge(ctx context.Context, req *testpb.ChargeRequest) (*testpb.ChargeResponse, error) {
	n := p.calls.Add(1)
	if p.hook != nil {
		return p.hook(ctx, req, n)
	}
	return &testpb.ChargeResponse{Id: fmt.Sprintf("ch_%d", n), Amount: req.GetAmount(), Currency: req.GetCurrency()}, nil
}

func (p *payments) Refund(_ context.Context, req *testpb.RefundRequest) (*testpb.RefundResponse, error) {
	n := p.calls.Add(1)
	return &testpb.RefundResponse{Id: fmt.Sprintf("re_%d", n)}, nil
}

func (p *payments) GetCharge(_ context.Context, req *testpb.GetChargeRequest) (*testpb.ChargeResponse, error) {
	p.calls.Add(1)
	return &testpb.ChargeResponse{Id: req.GetId()}, nil
}

func (p *payments) Watch(req *testpb.GetChargeRequest, s grpc.ServerStreamingServer[testpb.ChargeResponse]) error {
	p.calls.Add(1)
	return s.Send(&testpb.ChargeResponse{Id: req.GetId()})
}

// env is the test service behind idemgrpc's interceptors, over bufconn
// or TCP loopback.
type env struct {
	eng    *idem.Engine
	store  idem.Store
	svc    *payments
	client testpb.PaymentsClient // through idemgrpc's client interceptor
	raw    testpb.PaymentsClient // without it
}

// setup says how an env is built beyond its defaults.
type setup struct {
	ecfg   idem.Config
	cfg    idemgrpc.Config
	ccfg   idemgrpc.ClientConfig
	before []grpc.UnaryServerInterceptor // run before idemgrpc's
	dial   []grpc.DialOption
	tcp    bool
	// srvOpts are more server options; creds the client's transport
	// credentials (default: insecure).
	srvOpts []grpc.ServerOption
	creds   credentials.TransportCredentials
}

func newEnv(t testing.TB, st idem.Store, svc *payments, s setup) *env {
	t.Helper()
	eng, err := idem.New(st, s.ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if s.cfg.Scope == nil {
		s.cfg.Scope = idemgrpc.GlobalScope
	}
	return serve(t, eng, svc, s)
}

// serve starts a server running eng and a client connected to it.
func serve(t testing.TB, eng *idem.Engine, svc *payments, s setup) *env {
	t.Helper()
	ic, err := idemgrpc.UnaryServerInterceptor(eng, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(s.srvOpts, grpc.ChainUnaryInterceptor(append(s.before, ic)...))...)
	testpb.RegisterPaymentsServer(srv, svc)
	var lis net.Listener
	target := "passthrough:///bufnet"
	creds := s.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if s.tcp {
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		target = lis.Addr().String()
	} else {
		bl := bufconn.Listen(1 << 20)
		lis = bl
		dial = append(dial, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }))
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cic, err := idemgrpc.UnaryClientInterceptor(s.ccfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(target, append(append(dial, grpc.WithUnaryInterceptor(cic)), s.dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	raw, err := grpc.NewClient(target, append(dial, s.dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return &env{eng: eng, store: eng.Store(), svc: svc, client: testpb.NewPaymentsClient(conn), raw: testpb.NewPaymentsClient(raw)}
}

// charge calls Charge with key (none when empty) and returns the answer
// and whether its trailer says it was replayed.
func (e *env) charge(t *testing.T, key string, req *testpb.ChargeRequest) (*testpb.ChargeResponse, bool, error) {
	t.Helper()
	ctx := context.Background()
	if key != "" {
		ctx = idemgrpc.WithKey(ctx, idem.Key(key))
	}
	var tr metadata.MD
	resp, err := e.client.Charge(ctx, req, grpc.Trailer(&tr))
	return resp, replayed(tr), err
}

func replayed(tr metadata.MD) bool {
	v := tr.Get(idemgrpc.ReplayedTrailer)
	return len(v) == 1 && v[0] == "true"
}

// errorInfo returns err's idemgrpc ErrorInfo, failing t when it has none.
func errorInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idemgrpc.ErrorDomain {
			return ei
		}
	}
	t.Fatalf("no idemgrpc ErrorInfo in %v", err)
	return nil
}

// retryInfo returns err's RetryInfo detail, or nil.
func retryInfo(err error) *errdetails.RetryInfo {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri
		}
	}
	return nil
}

// downStore is a store whose claims fail as an unreachable backend's do.
type downStore struct{ idem.Store }

var errDown = errors.New("connection refused")

func (downStore) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	return idem.ClaimResult{}, &idem.StoreError{Op: "claim", Err: errDown}
}

// claimWatch is a store that signals each claim that found the key held.
type claimWatch struct {
	idem.Store
	held chan struct{}
}

func (c *claimWatch) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	cr, err := c.Store.Claim(ctx, p)
	if err == nil && !cr.Claimed && cr.Record.State == idem.StateInProgress {
		select {
		case c.held <- struct{}{}:
		default:
		}
	}
	return cr, err
}

var chargeReq = &testpb.ChargeRequest{Account: "acct_1", Amount: 1000, Currency: "EUR", Source: &testpb.ChargeRequest_Card{Card: "tok_visa"}}

func memstoreFor(t testing.TB) idem.Store {
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func benchEnv(b *testing.B) *env { return newEnv(b, memstoreFor(b), &payments{}, setup{}) }
