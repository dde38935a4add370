package cover

import (
	"time"

	"github.com/idemkit/idem"
)

// A Cover window the TTL does not cover: idem.New will refuse to start.
func cover() idem.Config {
	return idem.Config{TTL: time.Hour, Cover: map[string]time.Duration{"client retry chain": 48 * time.Hour}} // want `TTL 1h0m0s is shorter than the Cover window "client retry chain"`
}
