package stalenessalert_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/internal/vetutil"
	"github.com/idemkit/idem/idemvet/stalenessalert"
)

func TestStalenessAlert(t *testing.T) {
	vettest.Run(t, stalenessalert.Analyzer, "stalenessalert", "stalenessalert/ok")
}

// A directive with a reason silences the finding and is reported as such.
func TestIgnoredIsListed(t *testing.T) {
	res := vettest.Run(t, stalenessalert.Analyzer, "stalenessalert/ok")
	var got []vetutil.Suppressed
	for _, r := range res {
		got = append(got, r.Result.(*vetutil.Result).Suppressed...)
	}
	if len(got) != 1 || got[0].Reason != "the age alert lives in the platform team's shared rules" {
		t.Fatalf("suppressed = %+v", got)
	}
}
