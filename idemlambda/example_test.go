package idemlambda_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemlambda"
	"github.com/idemkit/idem/memstore"
)

// An HTTP API (v2) handler whose transfers run once per Idempotency-Key.
// In a function, the store is a dynamostore.Store and the last line is
// lambda.Start(handler).
func ExampleHTTP_APIGatewayV2() {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	w, err := idemlambda.NewHTTP(idemlambda.Config{Engine: eng})
	if err != nil {
		log.Fatal(err)
	}
	runs := 0
	handler := w.APIGatewayV2(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"tr_1"}`}, nil
	})

	ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /transfers", Body: `{"amount":50}`,
		Headers: map[string]string{"idempotency-key": "transfer-7"}}
	ev.RequestContext.HTTP.Method = "POST"
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "alice"}}}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // as Lambda gives it
	defer cancel()
	for range 2 {
		resp, _ := handler(ctx, ev)
		fmt.Printf("%d %s replayed=%q\n", resp.StatusCode, resp.Body, resp.Headers["Idempotent-Replayed"])
	}
	fmt.Println("runs:", runs)
	// Output:
	// 201 {"id":"tr_1"} replayed=""
	// 201 {"id":"tr_1"} replayed="true"
	// runs: 1
}

// Keys and payload validation from the body, as Powertools'
// event_key_jmespath="powertools_json(body).order_id" and
// payload_validation_jmespath do.
func ExampleConfig_pointers() {
	eng, _ := idem.New(memstore.New(), idem.Config{})
	defer eng.Close()
	w, err := idemlambda.NewHTTP(idemlambda.Config{
		Engine:              eng,
		KeyPointer:          "/body/order_id",
		FingerprintPointers: []string{"/body/amount", "/body/currency"},
	})
	fmt.Println(w != nil, err)
	// Output: true <nil>
}

// An SQS batch: each record runs once; in-flight duplicates, failures and
// unknown outcomes are reported in batchItemFailures; replays are
// acknowledged.
func ExampleSQS() {
	eng, _ := idem.New(memstore.New(), idem.Config{})
	defer eng.Close()
	s, err := idemlambda.NewSQS(idemlambda.Config{Engine: eng}, func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return fmt.Errorf("rejected")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: "ok", EventSourceARN: "arn:aws:sqs:eu-west-1:1:q"},
		{MessageId: "m2", Body: "bad", EventSourceARN: "arn:aws:sqs:eu-west-1:1:q"},
	}}
	resp, _ := s.Handle(context.Background(), batch)
	fmt.Println(resp.BatchItemFailures)
	// Output: [{m2}]
}
