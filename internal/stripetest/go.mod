module github.com/idemkit/idem/internal/stripetest

go 1.26.0

require github.com/stripe/stripe-go/v85 v85.0.0

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
