package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemmcp"
)

// clientAnswer is what a client got from one call through an adapter.
type clientAnswer struct {
	ok       bool   // the adapter's success (2xx, an OK status, a tool result that is not an error)
	replayed bool   // the adapter said it replayed a record
	body     string // the answer itself: status and body, the response or error, the tool result
	meta     string // what came beside it (gRPC trailers), for substring checks
}

// decisionAdapter is an adapter whose records the deciders must decide in
// the adapter's own form.
type decisionAdapter struct {
	name string
	// serve starts the adapter on eng; call then makes one call with key.
	// The handler leaves every first call's outcome unknown and fails the
	// test when it runs a second time for a key.
	serve func(t *testing.T, eng *idem.Engine) (call func(key string) clientAnswer)
	// body is what an operator gives `idem resolve --body` for a success:
	// the clientAnswer in the adapter's form, naming ch_manual.
	body string
	// failed is a substring of the failure the client gets after
	// `idem resolve --as failed --reason "declined by the bank"`.
	failed string
}

var decisionAdapters = []decisionAdapter{
	{"http", serveHTTPUnknown, `{"id":"ch_manual"}`, "500 "},
	{"grpc", serveGRPCUnknown, `{"username":"ch_manual"}`, "declined by the bank"},
	{"mcp", serveMCPUnknown, `{"content":[{"type":"text","text":"refund ch_manual made"}]}`, "declined by the bank"},
}

// TestDecisionReplaysThroughItsAdapter: for each adapter, records it left
// unknown are decided by `idem reconcile` (the provider applied one) and by
// `idem resolve` (an operator's success with a body, and a failure), run as
// the built binary; each retry through the adapter then replays the
// decision in the adapter's own terms — never record-unreadable — and the
// handler never runs again.
func TestDecisionReplaysThroughItsAdapter(t *testing.T) {
	t.Parallel()
	for _, a := range decisionAdapters {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "idem.db")
			dsn := "sqlite://" + path
			_, eng := openSQLiteEngine(t, path)
			call := a.serve(t, eng)
			for _, k := range []string{"k-applied", "k-resolved", "k-failed"} {
				if got := call(k); got.ok {
					t.Fatalf("first call %s succeeded: %+v", k, got)
				}
				rec, err := eng.Store().Get(context.Background(), "", k)
				if err != nil || rec.State != idem.StateUnknown {
					t.Fatalf("after the first call %s: %+v, %v; want unknown", k, rec, err)
				}
				if rec.Origin() != a.name {
					t.Errorf("record %s has origin %q, want %q", k, rec.Origin(), a.name)
				}
			}

			csv := filepath.Join(dir, "settlement.csv")
			at := time.Now().UTC().Format(time.RFC3339)
			if err := os.WriteFile(csv, []byte("key,amount,currency,status,applied_at,reference\nk-applied,1250,EUR,applied,"+at+",ch_rec\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if o, e, code := cli(t, "reconcile", "--store", dsn, "--provider-csv", csv, "--map", "reference=reference"); code == exitFailure || code == exitUsage {
				t.Fatalf("idem reconcile: exit %d\n%s%s", code, o, e)
			}
			body := filepath.Join(dir, "body.json")
			if err := os.WriteFile(body, []byte(a.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if o, e, code := cli(t, "resolve", "k-resolved", "--store", dsn, "--as", "succeeded", "--body", body, "--reason", "seen at the bank"); code != exitOK {
				t.Fatalf("idem resolve --as succeeded: exit %d\n%s%s", code, o, e)
			}
			if o, e, code := cli(t, "resolve", "k-failed", "--store", dsn, "--as", "failed", "--reason", "declined by the bank"); code != exitOK {
				t.Fatalf("idem resolve --as failed: exit %d\n%s%s", code, o, e)
			}

			if got := call("k-applied"); !got.ok || !got.replayed || !strings.Contains(got.body+got.meta, `"object":"idem.resolution"`) || !strings.Contains(got.body+got.meta, "ch_rec") {
				t.Errorf("retry after reconciliation: %+v; want a replayed success naming the provider's entry", got)
			}
			if got := call("k-resolved"); !got.ok || !got.replayed || !strings.Contains(got.body, "ch_manual") {
				t.Errorf("retry after idem resolve --as succeeded: %+v; want a replayed success with the operator's answer", got)
			}
			if got := call("k-failed"); got.ok || !got.replayed || !strings.Contains(got.body, a.failed) {
				t.Errorf("retry after idem resolve --as failed: %+v; want a replayed failure with %q", got, a.failed)
			}
		})
	}
}

// ranTwice is a handler's guard: the first call for a key leaves its
// outcome unknown, a second one is a test failure.
type ranTwice struct {
	t    *testing.T
	mu   sync.Mutex
	seen map[string]bool
}

func (r *ranTwice) first(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if r.seen[key] {
		r.t.Errorf("the handler ran again for %s", key)
	}
	r.seen[key] = true
}

func serveHTTPUnknown(t *testing.T, eng *idem.Engine) func(string) clientAnswer {
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	guard := &ranTwice{t: t}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guard.first(r.Header.Get("Idempotency-Key"))
		panic(http.ErrAbortHandler) // the attempt dies mid-effect
	}))
	return func(key string) clientAnswer {
		rw := httptest.NewRecorder()
		panicked := true
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(rw, httpCharge(key))
			panicked = false
		}()
		b, _ := io.ReadAll(rw.Body)
		return clientAnswer{ok: !panicked && rw.Code < 300, replayed: rw.Header().Get(idemhttp.ReplayedHeader) == "true",
			body: fmt.Sprintf("%d %s", rw.Code, b)}
	}
}

// unknownTestService answers every UnaryCall with an unknown outcome.
type unknownTestService struct {
	grpc_testing.UnimplementedTestServiceServer
	guard *ranTwice
}

func (s *unknownTestService) UnaryCall(ctx context.Context, _ *grpc_testing.SimpleRequest) (*grpc_testing.SimpleResponse, error) {
	s.guard.first(string(idemgrpc.AttemptFrom(ctx).Key))
	return nil, idem.Unknown(errors.New("the bank timed out"))
}

func serveGRPCUnknown(t *testing.T, eng *idem.Engine) func(string) clientAnswer {
	protect, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{Scope: idemgrpc.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	grpc_testing.RegisterTestServiceServer(srv, &unknownTestService{guard: &ranTwice{t: t}})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	keys, err := idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithUnaryInterceptor(keys))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	client := grpc_testing.NewTestServiceClient(conn)
	return func(key string) clientAnswer {
		var trailer metadata.MD
		resp, err := client.UnaryCall(idemgrpc.WithKey(context.Background(), idem.Key(key)), &grpc_testing.SimpleRequest{}, grpc.Trailer(&trailer))
		a := clientAnswer{ok: err == nil, replayed: len(trailer.Get(idemgrpc.ReplayedTrailer)) > 0}
		if err != nil {
			s := status.Convert(err)
			a.body = fmt.Sprintf("%s %s %s", s.Code(), idemgrpc.Reason(err), s.Message())
		} else {
			a.body = protojson.Format(resp)
		}
		for k, vs := range trailer {
			a.meta += fmt.Sprintf(" %s=%s", k, strings.Join(vs, ","))
		}
		return a
	}
}

func serveMCPUnknown(t *testing.T, eng *idem.Engine) func(string) clientAnswer {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "refunds", Version: "v1"}, nil)
	g, err := idemmcp.NewGuard(server, idemmcp.Config{Engine: eng, Scope: idemmcp.FixedScope("")})
	if err != nil {
		t.Fatal(err)
	}
	guard := &ranTwice{t: t}
	g.AddTool(&mcp.Tool{Name: "create_refund", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			k, _ := idemmcp.KeyFromContext(ctx)
			guard.first(string(k))
			return nil, idem.Unknown(errors.New("the bank timed out"))
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return func(key string) clientAnswer {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_refund", Arguments: map[string]any{idemmcp.KeyParam: key}})
		if err != nil {
			return clientAnswer{body: err.Error()}
		}
		b, _ := json.Marshal(res)
		replayed, _ := res.Meta[idemmcp.MetaReplayed].(bool)
		return clientAnswer{ok: !res.IsError, replayed: replayed, body: string(b)}
	}
}
