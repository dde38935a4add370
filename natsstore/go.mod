module github.com/idemkit/idem/natsstore

go 1.26.0

require (
	github.com/idemkit/idem v0.1.0
	github.com/nats-io/nats.go v1.55.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

require (
	github.com/idemkit/idem/internal/testenv v0.1.0
	go.uber.org/goleak v1.3.0
)
