package idemhttp

import (
	"strconv"
	"testing"
	"time"
)

// TestQuotaBucketsRefillAndAreEvicted: a spent bucket refills at
// Rate/Per; buckets idle for a whole period are dropped, so memory is
// bounded by the scopes active within one period; in-flight counts go
// when they reach zero.
func TestQuotaBucketsRefillAndAreEvicted(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	q := newQuotas(ScopeQuota{InFlight: 5, Rate: 2, Per: time.Minute}, time.Second)
	q.now = func() time.Time { return now }
	for i := 0; i < 2; i++ {
		if qe := q.acquire("a"); qe != nil {
			t.Fatalf("acquire %d: %v", i, qe)
		}
		q.done("a")
	}
	qe := q.acquire("a")
	if qe == nil || qe.Quota != QuotaRate || qe.RetryAfter != 30*time.Second {
		t.Fatalf("third acquire = %+v; want the rate quota, retry after 30s", qe)
	}
	now = now.Add(30 * time.Second) // one token back
	if qe := q.acquire("a"); qe != nil {
		t.Fatalf("after 30s: %v", qe)
	}
	q.done("a")
	for i := 0; i < 1000; i++ {
		if qe := q.acquire("s" + strconv.Itoa(i)); qe != nil {
			t.Fatal(qe)
		}
		q.done("s" + strconv.Itoa(i))
	}
	if inf, b := q.size(); inf != 0 || b != 1001 {
		t.Fatalf("state for %d in-flight and %d buckets, want 0 and 1001", inf, b)
	}
	now = now.Add(time.Minute)
	if qe := q.acquire("new"); qe != nil {
		t.Fatal(qe)
	}
	if inf, b := q.size(); inf != 1 || b != 1 {
		t.Fatalf("after a idle period: %d in-flight, %d buckets; want 1 and 1 (idle buckets evicted)", inf, b)
	}
}
