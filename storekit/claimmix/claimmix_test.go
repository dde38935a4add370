package claimmix

import "testing"

func TestMixSwitchesWithTheWorkload(t *testing.T) {
	var m Mix
	if !m.ReadFirst() {
		t.Fatal("the zero Mix is not read-first")
	}
	for range 2*Bound + 1 {
		m.Observe(false)
	}
	if m.ReadFirst() || m.Score() != -Bound {
		t.Fatalf("after first-time claims: read-first %v, score %d", m.ReadFirst(), m.Score())
	}
	for range Bound {
		m.Observe(true)
	}
	if !m.ReadFirst() {
		t.Fatalf("after duplicates the read-first path is off (score %d)", m.Score())
	}
	m.Pin(false)
	if m.ReadFirst() {
		t.Fatal("Pin(false) left read-first on")
	}
}
