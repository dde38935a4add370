package idemgrpc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestReplayWithTrailer(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open(t), &payments{}, setup{})
		first, rep, err := e.charge(t, "k1", chargeReq)
		if err != nil || rep {
			t.Fatalf("first call: %v, replayed %v", err, rep)
		}
		second, rep, err := e.charge(t, "k1", chargeReq)
		if err != nil || !rep {
			t.Fatalf("second call: %v, replayed %v; want the trailer %s: true", err, rep, idemgrpc.ReplayedTrailer)
		}
		if !proto.Equal(first, second) {
			t.Fatalf("replay %v, first answer %v", second, first)
		}
		if n := e.svc.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

func TestQuotedAndBareKeyAreOne(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	if _, _, err := e.charge(t, "abc", chargeReq); err != nil {
		t.Fatal(err)
	}
	var tr metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), idemgrpc.MetadataKey, "abc") // bare
	if _, err := e.client.Charge(ctx, chargeReq, grpc.Trailer(&tr)); err != nil || !replayed(tr) {
		t.Fatalf("bare key: %v, replayed %v; want the replay of the quoted key's call", err, replayed(tr))
	}
}

func TestRequiredKeyMissing(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{
		Rules: []idemgrpc.Rule{{Pattern: chargeMethod, Requirement: idemgrpc.Required}}}})
	_, _, err := e.charge(t, "", chargeReq)
	if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonKeyMissing {
		t.Fatalf("got %v, want InvalidArgument %s", err, idemgrpc.ReasonKeyMissing)
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times without a key", n)
	}
	// Refund is not matched by the rule: exempt.
	if _, err := e.client.Refund(context.Background(), &testpb.RefundRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestOptionalWithoutKeyPassesThrough(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	for range 2 {
		if _, rep, err := e.charge(t, "", chargeReq); err != nil || rep {
			t.Fatalf("%v, replayed %v", err, rep)
		}
	}
	if n := e.svc.calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestKeyInvalid(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	for name, md := range map[string]metadata.MD{
		"too long": metadata.Pairs(idemgrpc.MetadataKey, strings.Repeat("k", 256)),
		"repeated": metadata.Pairs(idemgrpc.MetadataKey, "a", idemgrpc.MetadataKey, "b"),
		"empty":    metadata.Pairs(idemgrpc.MetadataKey, `""`),
		"unquoted": metadata.Pairs(idemgrpc.MetadataKey, "a,b"),
	} {
		_, err := e.raw.Charge(metadata.NewOutgoingContext(context.Background(), md), chargeReq)
		if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonKeyInvalid {
			t.Errorf("%s: got %v, want InvalidArgument %s", name, err, idemgrpc.ReasonKeyInvalid)
		}
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestNoSideEffectsMethodIsExempt(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	ctx := idemgrpc.WithKey(context.Background(), "k")
	for range 2 {
		var tr metadata.MD
		if _, err := e.client.GetCharge(ctx, &testpb.GetChargeRequest{Id: "ch_1"}, grpc.Trailer(&tr)); err != nil || replayed(tr) {
			t.Fatalf("%v, replayed %v", err, replayed(tr))
		}
	}
	if n := e.svc.calls.Load(); n != 2 {
		t.Fatalf("GetCharge (NO_SIDE_EFFECTS) ran %d times, want 2: it is exempt", n)
	}
}

func TestStreamingPassesThrough(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	ctx := idemgrpc.WithKey(context.Background(), "k")
	for range 2 {
		s, err := e.client.Watch(ctx, &testpb.GetChargeRequest{Id: "ch_1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.svc.calls.Load(); n != 2 {
		t.Fatalf("Watch ran %d times, want 2: streams are not covered", n)
	}
}

// In a principal's scope, a mismatch names the fields that differ (in the
// global scope it names none: see digests_test.go).
func TestMismatchNamesFields(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: fixedScope("tenant-a")}})
		if _, _, err := e.charge(t, "k1", chargeReq); err != nil {
			t.Fatal(err)
		}
		other := proto.Clone(chargeReq).(*testpb.ChargeRequest)
		other.Amount = 2000
		other.Source = &testpb.ChargeRequest_Bank{Bank: "iban"}
		other.Labels = map[string]string{"a": "b"}
		_, _, err := e.charge(t, "k1", other)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("got %v, want FailedPrecondition", err)
		}
		ei := errorInfo(t, err)
		if ei.GetReason() != idemgrpc.ReasonKeyMismatch {
			t.Fatalf("reason %q", ei.GetReason())
		}
		if got, want := ei.GetMetadata()["fields"], "amount,bank,card,labels"; got != want {
			t.Fatalf("fields %q, want %q", got, want)
		}
		if _, ok := ei.GetMetadata()["method"]; ok {
			t.Fatalf("method reported different: %v", ei.GetMetadata())
		}
		if n := e.svc.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// Empty requests of two methods encode alike: only the method in the
// fingerprint tells them apart.
func TestMismatchOtherMethod(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	if _, _, err := e.charge(t, "k1", &testpb.ChargeRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.Refund(idemgrpc.WithKey(context.Background(), "k1"), &testpb.RefundRequest{})
	if status.Code(err) != codes.FailedPrecondition || idemgrpc.Reason(err) != idemgrpc.ReasonKeyMismatch {
		t.Fatalf("got %v, want FailedPrecondition %s", err, idemgrpc.ReasonKeyMismatch)
	}
	if m := errorInfo(t, err).GetMetadata()["method"]; m != "differs" {
		t.Fatalf("metadata method %q, want differs", m)
	}
}

func TestInFlightAborted(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		entered, release := make(chan struct{}), make(chan struct{})
		svc := &payments{hook: func(_ context.Context, req *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error) {
			close(entered)
			<-release
			return &testpb.ChargeResponse{Id: "ch_1"}, nil
		}}
		e := newEnv(t, open(t), svc, setup{ecfg: idem.Config{RetryAfter: 2 * time.Second}})
		done := make(chan error, 1)
		go func() { _, _, err := e.charge(t, "k1", chargeReq); done <- err }()
		<-entered
		_, _, err := e.charge(t, "k1", chargeReq)
		close(release)
		if status.Code(err) != codes.Aborted || idemgrpc.Reason(err) != idemgrpc.ReasonInFlight {
			t.Fatalf("got %v, want Aborted %s", err, idemgrpc.ReasonInFlight)
		}
		if ri := retryInfo(err); ri == nil || ri.GetRetryDelay().AsDuration() != 2*time.Second {
			t.Fatalf("RetryInfo %v, want a 2s delay", ri)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestInFlightWaitThenReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		entered, release := make(chan struct{}), make(chan struct{})
		svc := &payments{hook: func(_ context.Context, req *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error) {
			close(entered)
			<-release
			return &testpb.ChargeResponse{Id: "ch_1"}, nil
		}}
		// Two replicas over one store: the second finds the key held in
		// the store, not in its own engine.
		st := &claimWatch{Store: open(t), held: make(chan struct{}, 1)}
		wait := setup{cfg: idemgrpc.Config{Scope: idemgrpc.GlobalScope, Rules: []idemgrpc.Rule{{
			Requirement: idemgrpc.Optional, Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}}}}
		a := newEnv(t, st, svc, wait)
		e := newEnv(t, st, svc, wait)
		done := make(chan error, 1)
		go func() { _, _, err := a.charge(t, "k1", chargeReq); done <- err }()
		<-entered
		type result struct {
			resp *testpb.ChargeResponse
			rep  bool
			err  error
		}
		second := make(chan result, 1)
		go func() { r, rep, err := e.charge(t, "k1", chargeReq); second <- result{r, rep, err} }()
		<-st.held // the second call found the key held: it waits
		close(release)
		r := <-second
		if r.err != nil || !r.rep || r.resp.GetId() != "ch_1" {
			t.Fatalf("waiting duplicate: %v, replayed %v, %v; want the replay of ch_1", r.err, r.rep, r.resp)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := svc.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

func TestConcurrentIdenticalCallsOneEffect(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open(t), &payments{}, setup{cfg: idemgrpc.Config{Rules: []idemgrpc.Rule{{
			Requirement: idemgrpc.Optional, Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}}}})
		const n = 64
		var wg sync.WaitGroup
		resps := make([]*testpb.ChargeResponse, n)
		reps := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				resps[i], reps[i], errs[i] = e.charge(t, "same", chargeReq)
			})
		}
		close(start)
		wg.Wait()
		replays := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			if !proto.Equal(resps[i], resps[0]) {
				t.Fatalf("call %d answered %v, call 0 %v", i, resps[i], resps[0])
			}
			if reps[i] {
				replays++
			}
		}
		if c := e.svc.calls.Load(); c != 1 {
			t.Fatalf("%d concurrent identical calls ran the handler %d times, want 1", n, c)
		}
		if replays != n-1 {
			t.Fatalf("%d replays, want %d", replays, n-1)
		}
	})
}

func TestHandlerErrorRecordedAndReplayed(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		svc := &payments{hook: func(_ context.Context, req *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error) {
			if n == 1 {
				s, _ := status.New(codes.NotFound, "no such account").WithDetails(&errdetails.ResourceInfo{ResourceType: "account", ResourceName: "acct_1"})
				return nil, s.Err()
			}
			return &testpb.ChargeResponse{Id: "ch_2"}, nil
		}}
		e := newEnv(t, open(t), svc, setup{})
		_, rep, err1 := e.charge(t, "k1", chargeReq)
		if status.Code(err1) != codes.NotFound || rep {
			t.Fatalf("first call: %v, replayed %v", err1, rep)
		}
		_, rep, err2 := e.charge(t, "k1", chargeReq)
		if !rep {
			t.Fatal("the recorded error was not replayed with the trailer")
		}
		if !proto.Equal(status.Convert(err1).Proto(), status.Convert(err2).Proto()) {
			t.Fatalf("replayed %v, first %v: code, message and details must be the same", status.Convert(err2).Proto(), status.Convert(err1).Proto())
		}
		if n := svc.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

func TestReleasedAnswersRunAgain(t *testing.T) {
	for name, first := range map[string]error{
		"release code":  status.Error(codes.ResourceExhausted, "shedding load"),
		"idem.Release":  idem.Release(status.Error(codes.InvalidArgument, "bad account")),
		"plain release": idem.Release(nil),
	} {
		t.Run(name, func(t *testing.T) {
			svc := &payments{hook: func(_ context.Context, req *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error) {
				if n == 1 {
					return nil, first
				}
				return &testpb.ChargeResponse{Id: "ch_2"}, nil
			}}
			e := newEnv(t, memstoreFor(t), svc, setup{cfg: idemgrpc.Config{ReleaseCodes: []codes.Code{codes.ResourceExhausted}}})
			_, _, err := e.charge(t, "k1", chargeReq)
			if want := status.Code(first); name != "plain release" && status.Code(err) != want {
				t.Fatalf("first call: %v, want %s", err, want)
			}
			if name == "idem.Release" && status.Convert(err).Message() != "bad account" {
				t.Fatalf("message %q: the wrapper must not show", status.Convert(err).Message())
			}
			resp, rep, err := e.charge(t, "k1", chargeReq)
			if err != nil || rep || resp.GetId() != "ch_2" {
				t.Fatalf("retry: %v, replayed %v, %v; want a new run", err, rep, resp)
			}
		})
	}
}

func TestUnknownOutcomeAborted(t *testing.T) {
	for name, hook := range map[string]func(ctx context.Context) error{
		"deadline status":  func(context.Context) error { return status.Error(codes.DeadlineExceeded, "provider timed out") },
		"cancelled status": func(context.Context) error { return status.Error(codes.Canceled, "provider call cancelled") },
		"idem.Unknown":     func(context.Context) error { return idem.Unknown(status.Error(codes.Internal, "provider said 502")) },
		"effect timeout": func(ctx context.Context) error {
			<-ctx.Done()
			return status.Error(codes.Internal, "gave up") // ctx ended: unknown whatever the code
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc := &payments{hook: func(ctx context.Context, _ *testpb.ChargeRequest, _ int64) (*testpb.ChargeResponse, error) {
				return nil, hook(ctx)
			}}
			e := newEnv(t, memstoreFor(t), svc, setup{cfg: idemgrpc.Config{Rules: []idemgrpc.Rule{{
				Requirement: idemgrpc.Optional, Policy: idem.Policy{Timeout: 10 * time.Millisecond}}}}})
			_, _, err := e.charge(t, "k1", chargeReq)
			if status.Code(err) == codes.OK {
				t.Fatal("first call succeeded")
			}
			_, _, err = e.charge(t, "k1", chargeReq)
			if status.Code(err) != codes.Aborted || idemgrpc.Reason(err) != idemgrpc.ReasonOutcomeUnknown {
				t.Fatalf("retry: %v, want Aborted %s", err, idemgrpc.ReasonOutcomeUnknown)
			}
			if n := svc.calls.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			rec, err := e.store.Get(context.Background(), "", "k1")
			if err != nil || rec.State != idem.StateUnknown {
				t.Fatalf("record %+v, %v; want unknown", rec, err)
			}
		})
	}
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	e := newEnv(t, downStore{memstoreFor(t)}, &payments{}, setup{})
	_, _, err := e.charge(t, "k1", chargeReq)
	if status.Code(err) != codes.Unavailable || idemgrpc.Reason(err) != idemgrpc.ReasonStoreUnavailable {
		t.Fatalf("got %v, want Unavailable %s", err, idemgrpc.ReasonStoreUnavailable)
	}
	if retryInfo(err) == nil {
		t.Fatal("no RetryInfo")
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times unprotected", n)
	}
}

func TestScopes(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: idemgrpc.MetadataScope("x-tenant")}})
	call := func(tenant string) (*testpb.ChargeResponse, error) {
		ctx := idemgrpc.WithKey(context.Background(), "k1")
		if tenant != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
		}
		return e.client.Charge(ctx, chargeReq)
	}
	a, err := call("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := call("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetId() == b.GetId() {
		t.Fatalf("tenant b was served tenant a's answer %v", a)
	}
	_, err = call("")
	if status.Code(err) != codes.Unauthenticated || idemgrpc.Reason(err) != idemgrpc.ReasonScopeMissing {
		t.Fatalf("no tenant: %v, want Unauthenticated %s", err, idemgrpc.ReasonScopeMissing)
	}
	if n := e.svc.calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestScopeInvalid(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{
		Scope: func(context.Context, string) (string, error) { return "tenant\x00a", nil }}})
	_, _, err := e.charge(t, "k1", chargeReq)
	if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonScopeInvalid {
		t.Fatalf("got %v, want InvalidArgument %s", err, idemgrpc.ReasonScopeInvalid)
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
}

// A record whose answer cannot be decoded is refused, never re-run.
func TestRecordUnreadable(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	fp, err := idemgrpc.Fingerprint(chargeMethod, chargeReq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.DoBytes(context.Background(), idem.Request{Key: "k1", Fingerprint: fp},
		func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("not an answer"), nil }); err != nil {
		t.Fatal(err)
	}
	_, rep, err := e.charge(t, "k1", chargeReq)
	if status.Code(err) != codes.Internal || idemgrpc.Reason(err) != idemgrpc.ReasonRecordUnreadable || !rep {
		t.Fatalf("got %v, replayed %v; want Internal %s", err, rep, idemgrpc.ReasonRecordUnreadable)
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestScopeRequired(t *testing.T) {
	eng, err := idem.New(memstoreFor(t), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Scope is nil") {
		t.Fatalf("got %v, want the nil Scope refused", err)
	}
}

func TestResponseTooLarge(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{MaxResponse: 8}})
	resp, _, err := e.charge(t, "k1", chargeReq)
	if err != nil || resp.GetId() != "ch_1" {
		t.Fatalf("first call: %v, %v; want the whole answer", err, resp)
	}
	_, rep, err := e.charge(t, "k1", chargeReq)
	if status.Code(err) != codes.FailedPrecondition || idemgrpc.Reason(err) != idemgrpc.ReasonResponseTooLarge || !rep {
		t.Fatalf("replay: %v, replayed %v; want FailedPrecondition %s", err, rep, idemgrpc.ReasonResponseTooLarge)
	}
	if c := errorInfo(t, err).GetMetadata()["recorded_code"]; c != "OK" {
		t.Fatalf("recorded_code %q", c)
	}
	if n := e.svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// A handler that returns neither a response nor an error is answered
// Internal, and that answer is recorded like any other.
func TestNoAnswer(t *testing.T) {
	svc := &payments{hook: func(context.Context, *testpb.ChargeRequest, int64) (*testpb.ChargeResponse, error) {
		return nil, nil
	}}
	e := newEnv(t, memstoreFor(t), svc, setup{})
	for i := range 2 {
		_, rep, err := e.charge(t, "k1", chargeReq)
		if status.Code(err) != codes.Internal || rep != (i == 1) {
			t.Fatalf("call %d: %v, replayed %v; want Internal, replayed on the second", i, err, rep)
		}
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestAttemptFromForwardsTheKey(t *testing.T) {
	var got string
	svc := &payments{hook: func(ctx context.Context, _ *testpb.ChargeRequest, _ int64) (*testpb.ChargeResponse, error) {
		if a := idemgrpc.AttemptFrom(ctx); a != nil {
			got = a.ForwardKey()
		}
		return &testpb.ChargeResponse{}, nil
	}}
	e := newEnv(t, memstoreFor(t), svc, setup{})
	if _, _, err := e.charge(t, "pay:v1:42", chargeReq); err != nil {
		t.Fatal(err)
	}
	if got != "pay:v1:42" {
		t.Fatalf("AttemptFrom(ctx).ForwardKey() = %q", got)
	}
}

func TestObserverEvents(t *testing.T) {
	var mu sync.Mutex
	var outcomes []string
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome {
			mu.Lock()
			outcomes = append(outcomes, ev.Operation+" "+string(ev.Outcome))
			mu.Unlock()
		}
	})
	e := newEnv(t, memstoreFor(t), &payments{}, setup{ecfg: idem.Config{Observer: obs}})
	for range 2 {
		if _, _, err := e.charge(t, "k1", chargeReq); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{chargeMethod + " first", chargeMethod + " replay"}
	if strings.Join(outcomes, "|") != strings.Join(want, "|") {
		t.Fatalf("outcomes %q, want %q", outcomes, want)
	}
}

func TestTCPLoopback(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{tcp: true})
	first, _, err := e.charge(t, "k1", chargeReq)
	if err != nil {
		t.Fatal(err)
	}
	second, rep, err := e.charge(t, "k1", chargeReq)
	if err != nil || !rep || !proto.Equal(first, second) {
		t.Fatalf("replay over TCP: %v, replayed %v, %v", err, rep, second)
	}
}

// A response that is not a protobuf message (a handler behind another
// codec) is answered and recorded as Internal, not a panic.
func TestNonProtoResponse(t *testing.T) {
	eng, err := idem.New(memstoreFor(t), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ic, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{Scope: idemgrpc.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.MetadataKey, "k1"))
	info := &grpc.UnaryServerInfo{FullMethod: chargeMethod}
	runs := 0
	h := func(context.Context, any) (any, error) { runs++; return "not a message", nil }
	for range 2 {
		if _, err := ic(ctx, chargeReq, info, h); status.Code(err) != codes.Internal {
			t.Fatalf("got %v, want Internal", err)
		}
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}
}

// Metadata the handler sets is replayed only when Config.RecordMetadata
// names it.
func TestRecordMetadata(t *testing.T) {
	svc := &payments{hook: func(ctx context.Context, _ *testpb.ChargeRequest, n int64) (*testpb.ChargeResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-charge-id", "ch_1", "x-secret", "s"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-cost", "3"))
		return &testpb.ChargeResponse{Id: "ch_1"}, nil
	}}
	e := newEnv(t, memstoreFor(t), svc, setup{cfg: idemgrpc.Config{RecordMetadata: []string{"X-Charge-Id", "x-cost"}}})
	ctx := idemgrpc.WithKey(context.Background(), "k1")
	for i := range 2 {
		var hd, tr metadata.MD
		if _, err := e.client.Charge(ctx, chargeReq, grpc.Header(&hd), grpc.Trailer(&tr)); err != nil {
			t.Fatal(err)
		}
		if got := hd.Get("x-charge-id"); len(got) != 1 || got[0] != "ch_1" {
			t.Fatalf("call %d: header x-charge-id %q", i, got)
		}
		if got := tr.Get("x-cost"); len(got) != 1 || got[0] != "3" {
			t.Fatalf("call %d: trailer x-cost %q", i, got)
		}
		if secret := hd.Get("x-secret"); (i == 1) != (len(secret) == 0) {
			t.Fatalf("call %d: x-secret %q: sent on the first call, never recorded", i, secret)
		}
		if replayed(tr) != (i == 1) {
			t.Fatalf("call %d: replayed %v", i, replayed(tr))
		}
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestRecordMetadataRefusesReserved(t *testing.T) {
	eng, err := idem.New(memstoreFor(t), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, name := range []string{"grpc-status", ":authority", "Idempotent-Replayed", "idem-decision", "Idem-Decision-Bin", ""} {
		if _, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{Scope: idemgrpc.GlobalScope, RecordMetadata: []string{name}}); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
}
