package idemgrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestDecisionReplays: a call left unknown and then decided outside the
// call (through idem.EncodeDecision, as reconciliation and idem resolve
// do) replays the decision: a success as the method's response — the
// decider's body when it is one, an empty response otherwise — and a
// failure as FailedPrecondition DECIDED_FAILED, each with the decision in
// the trailers. The handler never runs again.
func TestDecisionReplays(t *testing.T) {
	t.Parallel()
	svc := &payments{hook: func(context.Context, *testpb.ChargeRequest, int64) (*testpb.ChargeResponse, error) {
		return nil, idem.Unknown(errors.New("the card network timed out"))
	}}
	e := newEnv(t, memstoreFor(t), svc, setup{})
	ctx := context.Background()
	decide := func(key string, d idem.Decision) {
		t.Helper()
		if _, _, err := e.charge(t, key, chargeReq); status.Code(err) == codes.OK {
			t.Fatalf("first call %s: %v, want an error", key, err)
		}
		rec, err := e.store.Get(ctx, "", key)
		if err != nil || rec.State != idem.StateUnknown || rec.Origin() != idemgrpc.Origin {
			t.Fatalf("record %s: %+v, %v; want unknown, origin grpc", key, rec, err)
		}
		val, err := idem.EncodeDecision(rec, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.eng.Resolve(ctx, "", idem.Key(key), idem.Resolution{As: d.As, Result: val, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	call := func(key string) (*testpb.ChargeResponse, metadata.MD, error) {
		var tr metadata.MD
		resp, err := e.client.Charge(idemgrpc.WithKey(ctx, idem.Key(key)), chargeReq, grpc.Trailer(&tr))
		return resp, tr, err
	}

	decide("k-response", idem.Decision{As: idem.StateSucceeded, Body: []byte(`{"id":"ch_manual","amount":"1000"}`)})
	resp, tr, err := call("k-response")
	if err != nil || resp.GetId() != "ch_manual" || resp.GetAmount() != 1000 || !replayed(tr) || first(tr, idemgrpc.DecisionTrailer) != "succeeded" {
		t.Errorf("decided with a response: %v, %v, %v", resp, tr, err)
	}

	body := `{"object":"idem.resolution","status":"applied","reference":"ch_1R9x"}`
	decide("k-other", idem.Decision{As: idem.StateSucceeded, Body: []byte(body)})
	resp, tr, err = call("k-other")
	if err != nil || resp.GetId() != "" || !replayed(tr) || first(tr, idemgrpc.DecisionBodyTrailer) != body {
		t.Errorf("decided with a body that is no response: %v, %v, %v; want an empty response, the body in the trailer", resp, tr, err)
	}

	decide("k-failed", idem.Decision{As: idem.StateFailed, Message: "the bank declined it", Status: 422})
	_, tr, err = call("k-failed")
	if status.Code(err) != codes.FailedPrecondition || idemgrpc.Reason(err) != idemgrpc.ReasonDecidedFailed ||
		status.Convert(err).Message() != "the bank declined it" || !replayed(tr) || first(tr, idemgrpc.DecisionTrailer) != "failed" {
		t.Errorf("decided failed: %v, %v", err, tr)
	}
	if n := svc.calls.Load(); n != 3 {
		t.Fatalf("the handler ran %d times for 3 keys", n)
	}
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}
