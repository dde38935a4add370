package pay

import (
	"math/rand"
	"net/http"
	"strconv"
	"testing"
)

func TestSend(t *testing.T) {
	r, _ := http.NewRequest("POST", "http://example.com", nil)
	r.Header.Set("Idempotency-Key", strconv.Itoa(rand.Int()))
	Send(r)
}
