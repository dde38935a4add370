package idemvet_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet"
)

// BenchmarkVetRepository is `idem vet ./...` over the idem repository
// (the root module: library, stores, examples). docs/vet.md has numbers.
func BenchmarkVetRepository(b *testing.B) {
	b.Setenv("GOWORK", "off")
	for b.Loop() {
		rep, err := idemvet.Run(idemvet.Options{Dir: ".."}, "./...")
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Findings) != 0 {
			b.Fatalf("findings in the repository: %+v", rep.Findings)
		}
	}
}
