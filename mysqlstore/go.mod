module github.com/idemkit/idem/mysqlstore

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/idemkit/idem v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/idemkit/idem/internal/testenv v0.1.0
)
