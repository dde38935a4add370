package sqlcodec_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/idemkit/idem/storekit/sqlcodec"
)

func TestMicrosRoundTrip(t *testing.T) {
	if sqlcodec.Micros(time.Time{}) != nil {
		t.Fatal("the zero time is not NULL")
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.FixedZone("x", 3600))
	v, ok := sqlcodec.Micros(at).(int64)
	if !ok {
		t.Fatalf("Micros = %T, want int64", sqlcodec.Micros(at))
	}
	back := sqlcodec.FromMicros(sql.NullInt64{Int64: v, Valid: true})
	if !back.Equal(at) || back.Location() != time.UTC {
		t.Fatalf("round trip: %v, want %v in UTC", back, at)
	}
	if !sqlcodec.FromMicros(sql.NullInt64{}).IsZero() {
		t.Fatal("NULL is not the zero time")
	}
}

func TestBytesKeepsEmptyApartFromNil(t *testing.T) {
	if sqlcodec.Bytes(nil) != nil {
		t.Fatal("nil is not NULL")
	}
	if b, ok := sqlcodec.Bytes([]byte{}).([]byte); !ok || b == nil {
		t.Fatal("an empty slice became NULL")
	}
}
