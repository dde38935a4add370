package groupcommit_test

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/groupcommit"
)

// A store's Config.Batch is a groupcommit.Config: a window turns batching
// on, with MaxSize defaulting to DefaultSize. For example
// pgstore.Config{Batch: groupcommit.Config{Window: 2 * time.Millisecond}}.
// The zero value is off (sqlitestore: every write its own transaction),
// except in pgstore, which reads it as its default, Eager.
func ExampleConfig() {
	off := groupcommit.Config{}
	on := groupcommit.Config{Window: 2 * time.Millisecond, MaxSize: 64}
	fmt.Println(off.On(), on.On(), on.Window <= groupcommit.MaxWindow && on.MaxSize <= groupcommit.MaxSize)
	// Output: false true true
}
