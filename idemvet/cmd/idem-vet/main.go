// Command idem-vet runs idem's analyzers as a go vet tool:
//
//	go install github.com/idemkit/idem/idemvet/cmd/idem-vet@latest
//	go vet -vettool=$(which idem-vet) ./...
//
// It also runs standalone (idem-vet ./..., with -fix to apply suggested
// fixes) and accepts each analyzer's enable flag (-keyentropy=false …).
// Findings in _test.go files are dropped unless -testfiles is given: tests
// build the failures on purpose. The //idem:ignore directive is honoured
// in every mode; `idem vet` also lists what it silenced.
package main

import (
	"flag"
	"strconv"

	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/idemkit/idem/idemvet"
	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

func main() {
	flag.BoolFunc("testfiles", "also report findings in _test.go files (tests build failures on purpose)", func(s string) error {
		on, err := strconv.ParseBool(s)
		vetutil.SetTestFiles(on)
		return err
	})
	multichecker.Main(idemvet.Analyzers()...)
}
