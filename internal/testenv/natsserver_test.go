package testenv

import (
	"net"
	"testing"
	"time"
)

func TestVersionBelow(t *testing.T) {
	for _, c := range []struct {
		v    [3]int
		want bool
	}{
		{[3]int{2, 9, 10}, true},
		{[3]int{2, 10, 18}, true},
		{[3]int{2, 10, 19}, false},
		{[3]int{2, 11, 0}, false},
		{[3]int{3, 0, 0}, false},
		{[3]int{1, 99, 99}, true},
	} {
		if got := versionBelow(c.v, MinClusterNATSServer); got != c.want {
			t.Errorf("versionBelow(%v, %v) = %v", c.v, MinClusterNATSServer, got)
		}
	}
}

// TestNATSServerKillRestart: a server of the test's own answers, is gone
// after Kill, and answers again after Restart on the same port.
func TestNATSServerKillRestart(t *testing.T) {
	n := StartNATSServer(t)
	dial := func() error {
		c, err := net.DialTimeout("tcp", n.Addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("started server: %v", err)
	}
	n.Kill()
	if err := dial(); err == nil {
		t.Fatal("killed server still accepts connections")
	}
	n.Restart()
	if err := dial(); err != nil {
		t.Fatalf("restarted server: %v", err)
	}
}
