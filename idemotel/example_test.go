package idemotel_test

import (
	"context"
	"fmt"
	"log"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/memstore"
)

// Each engine call becomes one "idem.do" span carrying its outcome and a
// hash of the key, never the key itself. Here an in-memory recorder stands
// in for an exporter; in a service, leave TracerProvider unset to use the
// global one.
func ExampleNew() {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer tp.Shutdown(context.Background())

	engine, err := idem.New(memstore.New(), idem.Config{
		Observer: idemotel.New(idemotel.Config{TracerProvider: tp}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()

	ctx := context.Background()
	req := idem.Request{Scope: "tenant-42", Key: "charge:v1:order-123:1", Operation: "charge"}
	charge := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_1"), nil }
	for range 2 { // the first call runs the charge, the retry replays it
		if _, err := engine.DoBytes(ctx, req, charge); err != nil {
			log.Fatal(err)
		}
	}

	for _, span := range recorder.Ended() {
		attrs := map[string]string{}
		for _, a := range span.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		fmt.Println(span.Name(), attrs["idem.operation"], attrs["idem.outcome"],
			attrs["idem.key_hash"] == idemotel.KeyHash("tenant-42", "charge:v1:order-123:1"))
	}
	// Output:
	// idem.do charge first true
	// idem.do charge replay true
}
