package idem

import (
	"errors"
	"strings"
	"testing"
)

// TestEncodeDecisionByOrigin: the encoder is picked by the origin the
// record's intent names; an origin nobody registered is refused (a record
// decided in a form its adapter cannot read would replay as unreadable),
// and so is a decision that is not succeeded or failed.
func TestEncodeDecisionByOrigin(t *testing.T) {
	t.Parallel()
	RegisterDecisionEncoder("test-origin", DecisionEncoderFunc(func(d Decision) ([]byte, error) {
		return []byte("test:" + string(d.As) + ":" + d.Message), nil
	}))
	rec := func(origin string) *Record {
		return &Record{Key: "k", Intent: encodeIntent(&Intent{Operation: "charge", Origin: origin})}
	}
	got, err := EncodeDecision(rec("test-origin"), Decision{As: StateFailed, Message: "declined"})
	if err != nil || string(got) != "test:failed:declined" {
		t.Fatalf("registered origin: %q, %v", got, err)
	}
	if _, err := EncodeDecision(rec("nobody"), Decision{As: StateSucceeded}); !errors.Is(err, ErrNoDecisionEncoder) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("unregistered origin: %v, want ErrNoDecisionEncoder naming it", err)
	}
	if _, err := EncodeDecision(rec("test-origin"), Decision{As: StateUnknown}); err == nil {
		t.Fatal("a decision as unknown was encoded")
	}
	if o := (&Record{Intent: []byte("not json")}).Origin(); o != "" {
		t.Fatalf("unreadable intent: origin %q, want the engine's", o)
	}
}

// TestEncodeEngineDecision: a record made by an engine caller (no origin)
// replays the application's value: a success needs it, a failure without
// one records its message.
func TestEncodeEngineDecision(t *testing.T) {
	t.Parallel()
	rec := &Record{Key: "k"}
	got, err := EncodeDecision(rec, Decision{As: StateSucceeded, Body: []byte(`{"id":"ch_1"}`)})
	if err != nil || string(got) != `{"id":"ch_1"}` {
		t.Fatalf("success: %q, %v", got, err)
	}
	if _, err := EncodeDecision(rec, Decision{As: StateSucceeded}); err == nil {
		t.Fatal("a success without a value was encoded")
	}
	got, err = EncodeDecision(rec, Decision{As: StateFailed, Message: "provider declined"})
	if err != nil || string(got) != "provider declined" {
		t.Fatalf("failure: %q, %v", got, err)
	}
	got, err = EncodeDecision(rec, Decision{As: StateFailed, Body: []byte("card_declined"), Message: "why"})
	if err != nil || string(got) != "card_declined" {
		t.Fatalf("failure with a value: %q, %v", got, err)
	}
}

// TestRegisterDecisionEncoderTwice: a second encoder for one origin is a
// programming error, caught at init.
func TestRegisterDecisionEncoderTwice(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("registering the engine's origin again did not panic")
		}
	}()
	RegisterDecisionEncoder("", DecisionEncoderFunc(func(Decision) ([]byte, error) { return nil, nil }))
}
