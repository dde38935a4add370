package idemlambda

// The failures AWS Lambda Powertools' users report against its DynamoDB
// idempotency, each as a scenario on dynamostore (dynalite) that must run
// the effect once.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// TestPowertools8386ConcurrentReclaimWhileRunning (python #8386, #8387;
// TypeScript #5678, #5714): Powertools reclaims an in-progress record as
// abandoned once its in-progress expiry passes, while the first run still
// goes on, and a concurrent duplicate runs the effect again. Here the
// first invocation runs for several leases (heartbeats keep its claim);
// duplicates arriving all the while get 409 and never run it; after it
// finishes they replay.
func TestPowertools8386ConcurrentReclaimWhileRunning(t *testing.T) {
	st := dynamoStore(t, dynamoClient(t))
	eng := newEngine(t, st, idem.Config{Lease: 300 * time.Millisecond})
	var runs atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{})
	h := newHTTP(t, Config{Engine: eng, Policy: idem.Policy{InFlight: idem.InFlightReject}}).APIGatewayV2(
		func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			if runs.Add(1) == 1 {
				close(started)
			}
			<-release
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "withdrawn"}, nil
		})
	ctx := invocation(t, time.Minute)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r, err := h(ctx, v2Event("w-1", `{"amount":100}`, "alice")); err != nil || r.StatusCode != 201 {
			t.Errorf("first = %+v, %v", r, err)
		}
	}()
	<-started
	// Duplicates for five leases' worth of time, each a new invocation.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		r, err := h(invocation(t, time.Minute), v2Event("w-1", `{"amount":100}`, "alice"))
		if err != nil || r.StatusCode != 409 || problemType(t, r.Body) != idemhttp.TypeInFlight {
			t.Fatalf("duplicate while the first runs = %d %s, %v; want 409 in-flight", r.StatusCode, r.Body, err)
		}
	}
	close(release)
	wg.Wait()
	r, err := h(ctx, v2Event("w-1", `{"amount":100}`, "alice"))
	if err != nil || r.Body != "withdrawn" || r.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("duplicate after = %+v, %v; want the replay", r, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
}

// TestPowertools5675RejectedDuplicateKeepsTheLock (TypeScript #5675): a
// duplicate rejected as in progress deleted the running request's record,
// so the next duplicate ran the effect. Here the rejected duplicate
// leaves the record as it was, and every later duplicate is rejected
// too.
func TestPowertools5675RejectedDuplicateKeepsTheLock(t *testing.T) {
	st := dynamoStore(t, dynamoClient(t))
	eng := newEngine(t, st, idem.Config{})
	var runs atomic.Int64
	release, started := make(chan struct{}), make(chan struct{})
	h := newHTTP(t, Config{Engine: eng, Policy: idem.Policy{InFlight: idem.InFlightReject}}).APIGatewayV2(
		func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			close(started)
			<-release
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	ctx := invocation(t, time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h(ctx, v2Event("o-1", `{}`, "alice"))
	}()
	<-started
	held, err := st.Get(ctx, "alice", "o-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, _ := h(ctx, v2Event("o-1", `{}`, "alice"))
		if r.StatusCode != 409 {
			t.Fatalf("duplicate %d = %d %s, want 409", i, r.StatusCode, r.Body)
		}
		now, err := st.Get(ctx, "alice", "o-1")
		if err != nil || now.State != idem.StateInProgress || now.AttemptID != held.AttemptID || now.Fence != held.Fence {
			t.Fatalf("record after rejected duplicate %d = %+v, %v; want the first attempt's claim untouched", i, now, err)
		}
	}
	close(release)
	<-done
	if n := runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
}

// TestPowertools8049LambdaTimeoutMidEffect (python #8049): a Lambda
// timeout in the middle of a withdrawal let a retry run it again. Here
// the effect is bounded by the invocation's remaining time less the
// margin; cut there, it ends unknown, and the retry — a new invocation
// with time to spare — does not run it: it answers outcome-unknown.
func TestPowertools8049LambdaTimeoutMidEffect(t *testing.T) {
	st := dynamoStore(t, dynamoClient(t))
	eng := newEngine(t, st, idem.Config{})
	var runs atomic.Int64
	h := newHTTP(t, Config{Engine: eng, DeadlineMargin: 200 * time.Millisecond}).APIGatewayV2(
		func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			<-ctx.Done() // the provider call hangs past the bound
			return events.APIGatewayV2HTTPResponse{}, ctx.Err()
		})
	first, err := h(invocation(t, 700*time.Millisecond), v2Event("w-9", `{"amount":500}`, "alice"))
	if err != nil || first.StatusCode != 504 || problemType(t, first.Body) != idemhttp.TypeOutcomeUnknown {
		t.Fatalf("invocation cut by its deadline = %d %s, %v; want 504 outcome-unknown", first.StatusCode, first.Body, err)
	}
	rec, err := st.Get(context.Background(), "alice", "w-9")
	if err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record = %+v, %v; want unknown (never released)", rec, err)
	}
	retry, err := h(invocation(t, time.Minute), v2Event("w-9", `{"amount":500}`, "alice"))
	if err != nil || retry.StatusCode != 409 || problemType(t, retry.Body) != idemhttp.TypeOutcomeUnknown {
		t.Fatalf("retry = %d %s, %v; want 409 outcome-unknown", retry.StatusCode, retry.Body, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("withdrawal ran %d times, want 1", n)
	}
}

// sqsEvent is a batch of records of one standard queue.
func sqsEvent(ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: id, Body: `{"transfer":"` + id + `"}`, EventSourceARN: "arn:aws:sqs:eu-west-1:1:transfers",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return ev
}

func failures(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// TestPowertoolsSQSBatchRedeliveredWithRecordsInFlight: a batch is
// redelivered while another invocation still runs one of its records.
// The finished record is acknowledged without running, the one in flight
// is reported in batchItemFailures (redelivered later, never run twice),
// the new one runs; when the redelivery comes back after the first
// invocation finished, everything replays.
func TestPowertoolsSQSBatchRedeliveredWithRecordsInFlight(t *testing.T) {
	st := dynamoStore(t, dynamoClient(t))
	eng := newEngine(t, st, idem.Config{})
	var mu sync.Mutex
	runs := map[string]int{}
	slowStarted, slowRelease := make(chan struct{}), make(chan struct{})
	s, err := NewSQS(Config{Engine: eng}, func(ctx context.Context, m events.SQSMessage) error {
		mu.Lock()
		runs[m.MessageId]++
		mu.Unlock()
		if m.MessageId == "m-slow" {
			close(slowStarted)
			<-slowRelease
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := invocation(t, time.Minute)
	if r, _ := s.Handle(ctx, sqsEvent("m-done")); len(r.BatchItemFailures) != 0 {
		t.Fatalf("first batch failures = %v", failures(r))
	}
	firstDone := make(chan events.SQSEventResponse)
	go func() {
		r, _ := s.Handle(ctx, sqsEvent("m-slow"))
		firstDone <- r
	}()
	<-slowStarted
	// The redelivered batch, in another invocation while m-slow runs.
	r, err := s.Handle(invocation(t, time.Minute), sqsEvent("m-done", "m-slow", "m-new"))
	if err != nil {
		t.Fatal(err)
	}
	if f := failures(r); len(f) != 1 || f[0] != "m-slow" {
		t.Fatalf("batchItemFailures = %v, want only the record in flight", f)
	}
	close(slowRelease)
	if r := <-firstDone; len(r.BatchItemFailures) != 0 {
		t.Fatalf("slow batch failures = %v", failures(r))
	}
	if r, _ := s.Handle(ctx, sqsEvent("m-done", "m-slow", "m-new")); len(r.BatchItemFailures) != 0 {
		t.Fatalf("final redelivery failures = %v, want every record acknowledged as a replay", failures(r))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"m-done", "m-slow", "m-new"} {
		if runs[id] != 1 {
			t.Fatalf("record %s ran %d times, want 1 (runs %v)", id, runs[id], runs)
		}
	}
}

// TestSQSFailuresAndDeadline: a failed record is reported and never
// re-run; a record cut by the invocation's deadline ends unknown, is
// reported, and is not re-run either; on a FIFO queue the first report
// stops the batch.
func TestSQSFailuresAndDeadline(t *testing.T) {
	st := dynamoStore(t, dynamoClient(t))
	eng := newEngine(t, st, idem.Config{})
	var mu sync.Mutex
	runs := map[string]int{}
	s, err := NewSQS(Config{Engine: eng, DeadlineMargin: 200 * time.Millisecond}, func(ctx context.Context, m events.SQSMessage) error {
		mu.Lock()
		runs[m.MessageId]++
		mu.Unlock()
		switch m.MessageId {
		case "bad":
			return errors.New("account closed")
		case "hang":
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, _ := s.Handle(invocation(t, time.Minute), sqsEvent("ok", "bad"))
		if f := failures(r); len(f) != 1 || f[0] != "bad" {
			t.Fatalf("failures = %v, want [bad]", f)
		}
	}
	r, _ := s.Handle(invocation(t, 700*time.Millisecond), sqsEvent("hang"))
	if f := failures(r); len(f) != 1 || f[0] != "hang" {
		t.Fatalf("failures = %v, want [hang]", f)
	}
	if rec, err := st.Get(context.Background(), "arn:aws:sqs:eu-west-1:1:transfers", "hang"); err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record of the cut effect = %+v, %v; want unknown", rec, err)
	}
	if r, _ := s.Handle(invocation(t, time.Minute), sqsEvent("hang")); len(r.BatchItemFailures) != 1 {
		t.Fatalf("redelivered unknown record = %v, want reported", failures(r))
	}
	fifo := sqsEvent("f1", "bad", "f3")
	for i := range fifo.Records {
		fifo.Records[i].EventSourceARN = "arn:aws:sqs:eu-west-1:1:transfers.fifo"
	}
	fifo.Records[1].MessageId = "bad"
	r, _ = s.Handle(invocation(t, time.Minute), fifo)
	if f := failures(r); len(f) != 2 || f[0] != "bad" || f[1] != "f3" {
		t.Fatalf("FIFO failures = %v, want [bad f3]", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["ok"] != 1 || runs["bad"] != 2 || runs["hang"] != 1 || runs["f3"] != 0 || runs["f1"] != 1 {
		t.Fatalf("runs = %v; want ok 1, bad 1 per queue (2), hang 1, f1 1, f3 0", runs)
	}
}

// TestWarmContainerReplayCache: with the engine's replay cache on, a warm
// container answers a replay of a record it saw without a store call
// (Powertools' use_local_cache).
func TestWarmContainerReplayCache(t *testing.T) {
	c := &countingAPI{API: dynamoClient(t)}
	st := dynamoStore(t, c)
	eng := newEngine(t, st, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, MaxAge: time.Minute, CacheRecorded: true}})
	tr := &transfer{}
	h := newHTTP(t, Config{Engine: eng}).APIGatewayV2(tr.v2)
	ctx := invocation(t, time.Minute)
	if _, err := h(ctx, v2Event("c-1", `{}`, "alice")); err != nil {
		t.Fatal(err)
	}
	before := c.calls.Load()
	r, err := h(ctx, v2Event("c-1", `{}`, "alice"))
	if err != nil || r.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("replay = %+v, %v", r, err)
	}
	if n := c.calls.Load() - before; n != 0 {
		t.Fatalf("the cached replay made %d store calls, want 0", n)
	}
	if tr.runs.Load() != 1 {
		t.Fatalf("runs = %d", tr.runs.Load())
	}
}
