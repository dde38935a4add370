module github.com/idemkit/idem/internal/testenv

go 1.26.0
