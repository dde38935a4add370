package batch_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
)

// A nightly fee job crashes after two of three accounts; the re-run of the
// same period skips the two already charged and applies only the third.
func ExampleRun() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	// Every run for the period 2024-06-01 meets the same keys.
	job := batch.Job{Engine: engine, Name: "fees", Run: "2024-06-01"}
	key, _ := job.Key("acct-1")
	fmt.Println("key:", key)

	items := []batch.Item[int64]{
		{ID: "acct-1", Value: 250},
		{ID: "acct-2", Value: 250},
		{ID: "acct-3", Value: 400},
	}
	charge := func(ctx context.Context, it batch.Item[int64]) error {
		fmt.Println("charging", it.ID, it.Value)
		return nil
	}

	ctx := context.Background()
	// The first run only got through two items before it stopped.
	rep, _ := batch.Run(ctx, job, items[:2], charge)
	fmt.Println("applied:", rep.Applied, "skipped:", rep.Skipped)

	// The re-run goes over every item; only acct-3 is charged.
	rep, _ = batch.Run(ctx, job, items, charge)
	fmt.Println("applied:", rep.Applied, "skipped:", rep.Skipped, "done:", rep.Done())
	// Output:
	// key: fees:v1:2024-06-01:acct-1
	// charging acct-1 250
	// charging acct-2 250
	// applied: [acct-1 acct-2] skipped: []
	// charging acct-3 400
	// applied: [acct-3] skipped: [acct-1 acct-2] done: true
}
