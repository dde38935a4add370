package mutation

import (
	"reflect"
	"testing"
)

func TestSplitRun(t *testing.T) {
	for run, want := range map[string][]string{
		"":                                       {""},
		"^TestA$":                                {"^TestA$"},
		"^TestC$/^Engine$/^(Replay|Divergence)$": {"^TestC$", "^Engine$", "^(Replay|Divergence)$"},
		"^TestA$|^TestC$/^Engine$":               {"^TestA$|^TestC$", "^Engine$"},
		"A[/]B/C(x/y)":                           {"A[/]B", "C(x/y)"},
		`A\/B/C`:                                 {`A\/B`, "C"},
	} {
		if got := splitRun(run); !reflect.DeepEqual(got, want) {
			t.Errorf("splitRun(%q) = %q, want %q", run, got, want)
		}
	}
}
