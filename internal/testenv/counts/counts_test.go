package counts

import (
	"slices"
	"testing"
)

func TestParseListAndLabel(t *testing.T) {
	got, err := ParseList(" 0, 10k,1M,10M ")
	if err != nil || !slices.Equal(got, []int64{0, 10_000, 1_000_000, 10_000_000}) {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "10k,1k", "1M,1M", "10G"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted", bad)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 10_000: "10k", 1_500_000: "1500k", 10_000_000: "10M"} {
		if got := Label(n); got != want {
			t.Errorf("Label(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseList(Label(n)); err != nil || back[0] != n {
			t.Errorf("ParseList(Label(%d)) = %v, %v", n, back, err)
		}
	}
}
