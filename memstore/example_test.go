package memstore_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// An engine over an in-memory store: the first call runs the effect and
// records its value; a duplicate with the same key gets that value back
// without running the effect again.
func Example() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	sent := 0
	req := idem.Request{
		Scope:       "tenant-42",
		Key:         "email:v1:welcome:user-7",
		Fingerprint: idem.NewFingerprint([]byte("welcome user-7")),
	}
	sendWelcome := func(context.Context, *idem.Attempt) ([]byte, error) {
		sent++ // the effect: an email goes out
		return []byte("msg-1"), nil
	}

	ctx := context.Background()
	for range 2 { // the message was delivered twice
		res, err := engine.DoBytes(ctx, req, sendWelcome)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("value=%s replayed=%v\n", res.Value, res.Replayed)
	}
	fmt.Println("emails sent:", sent)
	// Output:
	// value=msg-1 replayed=false
	// value=msg-1 replayed=true
	// emails sent: 1
}
