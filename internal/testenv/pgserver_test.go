//go:build unix

package testenv

import (
	"net"
	"os"
	"testing"
	"time"
)

func TestPGPortRange(t *testing.T) {
	for in, ok := range map[string]bool{"15400-15499": true, "1-1": true, "15499-15400": false, "x-1": false, "15400": false, "0-10": false, "1-70000": false} {
		t.Setenv(PGPorts.Env, in)
		if _, _, err := pgPortRange(); (err == nil) != ok {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestStartPostgresKill: a server starts on a port of PGPorts and Kill
// leaves none of its processes behind.
func TestStartPostgresKill(t *testing.T) {
	s := StartPostgres(t)
	lo, hi, _ := pgPortRange()
	if s.Port < lo || s.Port > hi {
		t.Errorf("port %d outside %d-%d", s.Port, lo, hi)
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	pid := s.cmd.Process.Pid
	children := childPIDs(pid)
	if len(children) == 0 {
		t.Fatalf("the postmaster %d has no children", pid)
	}
	s.Kill()
	for _, p := range append(children, pid) {
		if _, err := os.Stat("/proc/" + itoa(p)); err == nil {
			waitGone(p)
			if b, err := os.ReadFile("/proc/" + itoa(p) + "/stat"); err == nil && !zombie(b) {
				t.Errorf("process %d still runs after Kill", p)
			}
		}
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Kill", s.Addr())
	}
}
