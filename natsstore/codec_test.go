package natsstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestCodecRoundTrip(t *testing.T) {
	full := idem.Record{Scope: "s", Key: "k", Fingerprint: idem.NewFingerprint([]byte("x")), State: idem.StateSucceeded,
		Fence: 7, AttemptID: "att", Intent: []byte(`{"a":1}`), Result: []byte("res"), Mark: idem.Mark("reconciled"),
		CreatedAt: t0, LeaseUntil: t0.Add(time.Second), CompletedAt: t0.Add(2 * time.Second), ExpiresAt: t0.Add(time.Hour)}
	for _, r := range []idem.Record{
		full,
		{State: idem.StateInProgress, Fence: 1},
		{State: idem.StateUnknown, Fence: 1 << 62, CreatedAt: time.UnixMicro(0).UTC(), LeaseUntil: time.UnixMicro(-5).UTC()},
	} {
		got, err := decodeRecord(encodeRecord(&r))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", *got, r)
		}
	}
}

// FuzzDecodeRecord: no value makes decodeRecord panic, and every value it
// accepts encodes back to itself.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(&idem.Record{Scope: "s", Key: "k", State: idem.StateFailed, Fence: 3, Result: []byte("r"), CreatedAt: t0}))
	f.Add([]byte("N1p"))
	f.Add([]byte("I1p1:"))
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeRecord(v)
		if err != nil {
			return
		}
		if again, err := decodeRecord(encodeRecord(r)); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding %q: %+v, %v; want %+v", v, again, err, r)
		}
	})
}
