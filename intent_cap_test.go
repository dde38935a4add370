package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// An intent larger than Config.MaxIntent is refused with an
// *IntentTooLargeError before anything is claimed or run; one at the bound
// is claimed; a negative bound lets any size through.
func TestIntentOverTheBoundIsRefused(t *testing.T) {
	st := memstore.New()
	e := newEngine(t, st, idem.Config{})
	ran := false
	effect := func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return []byte("v"), nil }
	big := &idem.Intent{Operation: "op", Fields: map[string]string{"note": strings.Repeat("x", idem.DefaultMaxIntent)}}
	_, err := e.DoBytes(context.Background(), idem.Request{Key: "big", Intent: big}, effect)
	var te *idem.IntentTooLargeError
	if !errors.Is(err, idem.ErrIntentTooLarge) || !errors.As(err, &te) || te.Max != idem.DefaultMaxIntent || te.Size <= te.Max {
		t.Fatalf("err = %v, want an *IntentTooLargeError over %d bytes", err, idem.DefaultMaxIntent)
	}
	if ran {
		t.Error("the effect ran")
	}
	if _, err := st.Get(context.Background(), "", "big"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("a refused intent left a record: %v", err)
	}
	// The lazy intent is measured the same way.
	_, err = e.DoBytes(context.Background(), idem.Request{Key: "lazy", LazyIntent: builder{big}}, effect)
	if !errors.Is(err, idem.ErrIntentTooLarge) || ran {
		t.Fatalf("lazy intent: err = %v, ran %v; want ErrIntentTooLarge, not run", err, ran)
	}

	small := newEngine(t, memstore.New(), idem.Config{MaxIntent: 64})
	fits := &idem.Intent{Operation: "op"}
	if _, err := small.DoBytes(context.Background(), idem.Request{Key: "fits", Intent: fits}, effect); err != nil {
		t.Fatalf("a small intent: %v", err)
	}
	unbounded := newEngine(t, memstore.New(), idem.Config{MaxIntent: -1})
	if _, err := unbounded.DoBytes(context.Background(), idem.Request{Key: "big", Intent: big}, effect); err != nil {
		t.Fatalf("MaxIntent -1: %v", err)
	}
}

type builder struct{ in *idem.Intent }

func (b builder) BuildIntent() *idem.Intent { return b.in }
