module github.com/idemkit/idem

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
