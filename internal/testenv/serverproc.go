package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// serverProc is a server process a test started (a Redis node, a NATS
// node): in a process group of its own, so that a kill takes its children
// with it, and logging to the file "log" in its directory.
type serverProc struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// spawn starts bin with args in dir and returns the command and a channel
// closed when it exits.
func (p *serverProc) spawn(dir, bin string, args ...string) (*exec.Cmd, <-chan struct{}, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return cmd, done, nil
}

// pid is the running process's id (0 when it is not running).
func (p *serverProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill SIGKILLs the process group and waits until the process has exited.
func (p *serverProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// logTail returns the end of dir's file "log" (up to 4 KiB), for failure
// messages.
func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// waitListening dials addr until it accepts a connection, up to tries
// times 50ms apart, and returns the last dial error if it never does.
func waitListening(addr string, tries int) error {
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if i == tries {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
