package idemgrpc_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fixedScope scopes every call by scope.
func fixedScope(scope string) idemgrpc.ScopeFunc {
	return func(context.Context, string) (string, error) { return scope, nil }
}

// tenantScope scopes a call by its x-tenant metadata, in clear (so that a
// test can find its records).
func tenantScope(ctx context.Context, _ string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-tenant"); len(v) == 1 && v[0] != "" {
		return "tenant:" + v[0], nil
	}
	return "", idemgrpc.ErrNoScope
}

func chargeAs(e *env, tenant, key string, req *testpb.ChargeRequest) error {
	ctx := metadata.AppendToOutgoingContext(idemgrpc.WithKey(context.Background(), idem.Key(key)), "x-tenant", tenant)
	_, err := e.client.Charge(ctx, req)
	return err
}

// recordedIntent returns the intent recorded for (scope, key).
func recordedIntent(t *testing.T, st idem.Store, scope, key string) *idem.Intent {
	t.Helper()
	rec, err := st.Get(context.Background(), scope, key)
	if err != nil {
		t.Fatal(err)
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil || in == nil {
		t.Fatalf("intent %q: %v", rec.Intent, err)
	}
	return in
}

// The same message in several scopes is recorded with field digests that
// have nothing in common, so records cannot be compared across callers;
// within its own scope a caller is still told which field it changed.
func TestFieldDigestsAreKeyedPerScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: tenantScope}})
		seen := map[string]string{}
		for _, tenant := range []string{"alice", "bob", "carol"} {
			if err := chargeAs(e, tenant, "k1", chargeReq); err != nil {
				t.Fatal(err)
			}
			in := recordedIntent(t, e.store, "tenant:"+tenant, "k1")
			if _, ok := in.Fields[unkeyedDigestsField]; ok {
				t.Errorf("%s's record keeps unkeyed digests: %v", tenant, in.Fields)
			}
			id, enc, _ := strings.Cut(in.Fields[idem.KeyedDigestsField], ":")
			q, err := url.ParseQuery(enc)
			if id == "" || err != nil || len(q) != 4 {
				t.Fatalf("%s: digests %q (%v), want 4 keyed ones", tenant, in.Fields[idem.KeyedDigestsField], err)
			}
			for name, v := range q {
				if prev, ok := seen[v[0]]; ok {
					t.Errorf("%s's digest of %q equals %s", tenant, name, prev)
				}
				seen[v[0]] = tenant + "'s digest of " + name
			}
		}
		if n := e.svc.calls.Load(); n != 3 {
			t.Fatalf("handler ran %d times, want 3 (one per tenant)", n)
		}
		other := proto.Clone(chargeReq).(*testpb.ChargeRequest)
		other.Amount = 2000
		err := chargeAs(e, "bob", "k1", other)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("got %v, want FailedPrecondition", err)
		}
		if got := errorInfo(t, err).GetMetadata()["fields"]; got != "amount" {
			t.Fatalf("fields %q, want amount", got)
		}
	})
}

// In the global scope no digests are recorded and a mismatch names no
// fields: every guess at another caller's message that is not the whole
// message gets the same answer.
func TestGlobalScopeNamesNoFields(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: idemgrpc.GlobalScope}})
	if _, _, err := e.charge(t, "k1", chargeReq); err != nil {
		t.Fatal(err)
	}
	in := recordedIntent(t, e.store, "", "k1")
	if _, ok := in.Fields[idem.KeyedDigestsField]; ok {
		t.Errorf("the global scope keeps digests: %v", in.Fields)
	}
	if _, ok := in.Fields[unkeyedDigestsField]; ok {
		t.Errorf("the global scope keeps unkeyed digests: %v", in.Fields)
	}
	var first string
	for _, guess := range []func(r *testpb.ChargeRequest){
		func(r *testpb.ChargeRequest) { r.Amount = 999 },
		func(r *testpb.ChargeRequest) { r.Currency = "USD" },
		func(r *testpb.ChargeRequest) { r.Source = &testpb.ChargeRequest_Bank{Bank: "iban"} },
	} {
		r := proto.Clone(chargeReq).(*testpb.ChargeRequest)
		guess(r)
		_, _, err := e.charge(t, "k1", r)
		if idemgrpc.Reason(err) != idemgrpc.ReasonKeyMismatch {
			t.Fatalf("got %v, want %s", err, idemgrpc.ReasonKeyMismatch)
		}
		meta := errorInfo(t, err).GetMetadata()
		if f, ok := meta["fields"]; ok {
			t.Fatalf("the global scope names fields %q", f)
		}
		got := status.Convert(err).Message() + " " + strings.Join(metaPairs(meta), ",")
		if first == "" {
			first = got
		} else if got != first {
			t.Fatalf("guess answered %q, another %q", got, first)
		}
	}
}

func metaPairs(m map[string]string) []string {
	var p []string
	for k, v := range m {
		p = append(p, k+"="+v)
	}
	return p
}

// Servers sharing a store and a DigestSecret name each other's differing
// fields; with another secret (each its own random one, by default) they
// name none rather than every field.
func TestDigestSecretAcrossServers(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	st := memstoreFor(t)
	a := newEnv(t, st, &payments{}, setup{cfg: idemgrpc.Config{Scope: fixedScope("tenant-a"), DigestSecret: secret}})
	b := newEnv(t, st, &payments{}, setup{cfg: idemgrpc.Config{Scope: fixedScope("tenant-a"), DigestSecret: secret}})
	c := newEnv(t, st, &payments{}, setup{cfg: idemgrpc.Config{Scope: fixedScope("tenant-a")}})
	if _, _, err := a.charge(t, "k1", chargeReq); err != nil {
		t.Fatal(err)
	}
	other := proto.Clone(chargeReq).(*testpb.ChargeRequest)
	other.Currency = "USD"
	_, _, err := b.charge(t, "k1", other)
	if got := errorInfo(t, err).GetMetadata()["fields"]; got != "currency" {
		t.Fatalf("same secret: fields %q, want currency", got)
	}
	_, _, err = c.charge(t, "k1", other)
	if idemgrpc.Reason(err) != idemgrpc.ReasonKeyMismatch {
		t.Fatalf("got %v, want %s", err, idemgrpc.ReasonKeyMismatch)
	}
	if f, ok := errorInfo(t, err).GetMetadata()["fields"]; ok {
		t.Fatalf("another secret: fields %q, want none", f)
	}
}

func TestDigestSecretTooShort(t *testing.T) {
	eng, err := idem.New(memstoreFor(t), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	_, err = idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{Scope: idemgrpc.GlobalScope, DigestSecret: []byte("short")})
	if !errors.Is(err, idem.ErrDigestSecretTooShort) || !strings.Contains(err.Error(), "Config.DigestSecret") {
		t.Fatalf("got %v, want idem.ErrDigestSecretTooShort naming Config.DigestSecret", err)
	}
}

// unkeyedDigestsField is where unkeyed digests were once stored (the
// deprecated idem.DigestsField).
const unkeyedDigestsField = "idem.digests"
