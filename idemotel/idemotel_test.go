package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/memstore"
)

func TestSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := idemotel.New(idemotel.Config{TracerProvider: tp, StoreSpans: true})
	eng, err := idem.New(memstore.New(), idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "handler")
	const scope, key = "acct-4111111111111111", "order-secret-42"
	req := idem.Request{Scope: scope, Key: key, Operation: "charge"}
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }
	for range 2 {
		if _, err := eng.DoBytes(ctx, req, h); err != nil {
			t.Fatal(err)
		}
	}
	_, err = eng.DoBytes(ctx, idem.Request{Scope: scope, Key: "lost", Operation: "charge"},
		func(context.Context, *idem.Attempt) ([]byte, error) {
			return nil, idem.Unknown(errors.New("order-secret-42 lost"))
		})
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	parent.End()

	var outcomes []string
	stores := 0
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if v := a.Value.String(); strings.Contains(v, key) || strings.Contains(v, scope) {
				t.Errorf("span %s attribute %s carries the raw key or scope: %q", s.Name(), a.Key, v)
			}
		}
		switch {
		case s.Name() == "idem.do":
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("idem.do span is not a child of the caller's span")
			}
			attrs := map[string]string{}
			for _, a := range s.Attributes() {
				attrs[string(a.Key)] = a.Value.String()
			}
			outcomes = append(outcomes, attrs["idem.outcome"])
			if attrs["idem.key_hash"] == "" || attrs["idem.scope_hash"] != idemotel.ScopeHash(scope) || attrs["idem.operation"] != "charge" {
				t.Errorf("attributes %v", attrs)
			}
			if attrs["idem.outcome"] == "unknown" && (s.Status().Code.String() != "Error" || attrs["idem.error"] != "unknown_outcome") {
				t.Errorf("unknown span: status %v, attrs %v", s.Status(), attrs)
			}
			if s.EndTime().Before(s.StartTime()) {
				t.Errorf("span ends before it starts")
			}
		case strings.HasPrefix(s.Name(), "idem.store."):
			stores++
		}
	}
	if strings.Join(outcomes, ",") != "first,replay,unknown" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if stores < 4 { // a replay may be served from the engine's cache, without a store call
		t.Fatalf("store spans = %d, want at least claim+finish twice", stores)
	}
	if idemotel.KeyHash(scope, key) == idemotel.KeyHash(scope+"x", key) {
		t.Fatal("key hash ignores the scope")
	}
}
