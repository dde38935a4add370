package idemmcp_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/memstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tenantMeta is the _meta entry the tests' scope function reads.
const tenantMeta = "test/tenant"

// tenantScope scopes a call by its _meta tenant, in clear (so that a test
// can find its records).
func tenantScope(_ context.Context, req *mcp.CallToolRequest) (string, error) {
	if s, _ := req.Params.Meta[tenantMeta].(string); s != "" {
		return "tenant:" + s, nil
	}
	return "", idemmcp.ErrNoPrincipal
}

func callAs(t *testing.T, cs *mcp.ClientSession, tenant, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{tenantMeta: tenant}})
	if err != nil {
		t.Fatalf("CallTool(%s) as %s: %v", name, tenant, err)
	}
	return res
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

// The same arguments in several scopes are recorded with digests that have
// nothing in common, so records cannot be compared across callers; within
// its own scope a caller is still told which argument it changed.
func TestArgumentDigestsAreKeyedPerScope(t *testing.T) {
	t.Parallel()
	f, err := newFixture(tenantScope, idem.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, f)
	seen := map[string]string{}
	for _, tenant := range []string{"alice", "bob", "carol"} {
		refundID(t, callAs(t, cs, tenant, "create_refund", refund("k1", 500)))
		in := recordedIntent(t, f.store, "tenant:"+tenant, "k1")
		if _, ok := in.Fields[unkeyedDigestsField]; ok {
			t.Errorf("%s's record keeps unkeyed digests: %v", tenant, in.Fields)
		}
		id, enc, _ := strings.Cut(in.Fields[idem.KeyedDigestsField], ":")
		q, err := url.ParseQuery(enc)
		if id == "" || err != nil || len(q) != 2 {
			t.Fatalf("%s: digests %q (%v), want 2 keyed ones", tenant, in.Fields[idem.KeyedDigestsField], err)
		}
		for name, v := range q {
			if prev, ok := seen[v[0]]; ok {
				t.Errorf("%s's digest of %q equals %s", tenant, name, prev)
			}
			seen[v[0]] = tenant + "'s digest of " + name
		}
	}
	if n := f.refunds.Load(); n != 3 {
		t.Fatalf("%d refunds, want 3 (one per tenant)", n)
	}
	msg := text(callAs(t, cs, "bob", "create_refund", refund("k1", 900)))
	if !strings.Contains(msg, "arguments that differ: amount)") {
		t.Fatalf("mismatch = %q, want it to name amount alone", msg)
	}
}

// In the global scope no digests are recorded and a mismatch names no
// arguments: every guess at another caller's arguments that is not all of
// them gets the same answer.
func TestGlobalScopeNamesNoArguments(t *testing.T) {
	t.Parallel()
	f, err := newFixture(idemmcp.FixedScope(""), idem.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, f)
	refundID(t, call(t, cs, "create_refund", refund("k1", 500)))
	in := recordedIntent(t, f.store, "", "k1")
	if _, ok := in.Fields[idem.KeyedDigestsField]; ok {
		t.Errorf("the global scope keeps digests: %v", in.Fields)
	}
	if _, ok := in.Fields[unkeyedDigestsField]; ok {
		t.Errorf("the global scope keeps unkeyed digests: %v", in.Fields)
	}
	var first string
	for _, guess := range []map[string]any{
		refund("k1", 499),
		{"charge_id": "ch_2", "amount": 500, idemmcp.KeyParam: "k1"},
		{"charge_id": "ch_2", "amount": 501, idemmcp.KeyParam: "k1"},
	} {
		res := call(t, cs, "create_refund", guess)
		msg := text(res)
		if !res.IsError || !strings.Contains(msg, "already used") || strings.Contains(msg, "arguments that differ") {
			t.Fatalf("guess %v: %q, want a mismatch naming no arguments", guess, msg)
		}
		if first == "" {
			first = msg
		} else if msg != first {
			t.Fatalf("guess %v answered %q, another %q", guess, msg, first)
		}
	}
	if n := f.refunds.Load(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// Guards sharing a store and a DigestSecret name each other's differing
// arguments; with another secret (each its own random one, by default)
// they name none rather than every argument.
func TestDigestSecretAcrossGuards(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	secret := []byte("0123456789abcdef0123456789abcdef")
	connectOn := func(cfg idemmcp.Config) *mcp.ClientSession {
		cfg.Scope = idemmcp.FixedScope("user:alice")
		f, err := newFixtureOn(st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return connect(t, f)
	}
	a := connectOn(idemmcp.Config{DigestSecret: secret})
	b := connectOn(idemmcp.Config{DigestSecret: secret})
	c := connectOn(idemmcp.Config{})
	refundID(t, call(t, a, "create_refund", refund("k1", 500)))
	if msg := text(call(t, b, "create_refund", refund("k1", 900))); !strings.Contains(msg, "arguments that differ: amount)") {
		t.Fatalf("same secret: %q, want it to name amount", msg)
	}
	if msg := text(call(t, c, "create_refund", refund("k1", 900))); !strings.Contains(msg, "already used") || strings.Contains(msg, "arguments that differ") {
		t.Fatalf("another secret: %q, want a mismatch naming no arguments", msg)
	}
}

func TestDigestSecretTooShort(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = idemmcp.NewGuard(mcp.NewServer(&mcp.Implementation{Name: "x", Version: "v1"}, nil),
		idemmcp.Config{Engine: e, DigestSecret: []byte("short")})
	if !errors.Is(err, idem.ErrDigestSecretTooShort) || !strings.Contains(err.Error(), "Config.DigestSecret") {
		t.Fatalf("got %v, want idem.ErrDigestSecretTooShort naming Config.DigestSecret", err)
	}
}

// unkeyedDigestsField is where unkeyed digests were once stored (the
// deprecated idem.DigestsField).
const unkeyedDigestsField = "idem.digests"
