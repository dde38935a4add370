package sim

import "testing"

func TestSimQuick(t *testing.T) {
	r := Run(Default(1))
	t.Log(r.Summary())
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for i, v := range r.Violations {
		if i > 20 {
			break
		}
		t.Error(v)
	}
}
