package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), sqlitestore.Config{
		Migrate: true, // apply the embedded schema
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	now := time.Now().UTC().Truncate(time.Microsecond)
	claim := func(attempt string) idem.ClaimResult {
		r, err := st.Claim(ctx, idem.ClaimParams{
			Scope: "acct-42", Key: "charge:v1:order-123:1", AttemptID: attempt,
			Fingerprint: idem.NewFingerprint([]byte("POST /charges"), []byte(`{"amount":50}`)),
			Now:         now, LeaseUntil: now.Add(time.Minute),
		})
		if err != nil {
			panic(err)
		}
		return r
	}

	first := claim("attempt-1")
	fmt.Println("first claimed:", first.Claimed, "fence:", first.Record.Fence)
	// ... run the effect, then record its outcome.
	_, err = st.Finish(ctx, idem.FinishParams{
		Scope: "acct-42", Key: "charge:v1:order-123:1",
		Fence: first.Record.Fence, AttemptID: "attempt-1",
		State: idem.StateSucceeded, Result: []byte(`{"charge":"ch_1"}`),
		CompletedAt: now, ExpiresAt: now.Add(24 * time.Hour),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	dup := claim("attempt-2")
	fmt.Println("duplicate claimed:", dup.Claimed, "state:", dup.Record.State, "result:", string(dup.Record.Result))
	// Output:
	// first claimed: true fence: 1
	// duplicate claimed: false state: succeeded result: {"charge":"ch_1"}
}
