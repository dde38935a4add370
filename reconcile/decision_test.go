package reconcile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

// TestNoEncoderLeavesUndecided: a record whose origin no imported adapter
// registered an encoder for is left unknown with an error for its key,
// never written in a form its retries could not read.
func TestNoEncoderLeavesUndecided(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.DoBytes(ctx, idem.Request{Key: "k-1", Intent: &idem.Intent{Operation: "charge", Origin: "carrier-pigeon"}},
		func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(errors.New("lost")) })
	eng.Close()
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.csv")
	if err := os.WriteFile(file, []byte("key,amount,currency,status,applied_at\nk-1,100,EUR,applied,"+time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, runErr := reconcileOnce(t, st, provider(t, file, "csv"), nil, reconcile.Config{})
	if runErr != nil || rep.Counts[reconcile.ClassUnderCounted] != 0 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], `"carrier-pigeon"`) {
		t.Fatalf("%+v, %v; want k-1 undecided with an error naming its origin", rep, runErr)
	}
	if rec, err := st.Get(ctx, "", "k-1"); err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("k-1 = %+v, %v; want it left unknown", rec, err)
	}
}
