//go:build unix

package mutation

import (
	"os/exec"
	"syscall"
	"time"
)

// killGroup makes cmd's cancellation kill its whole process group: go test
// and the test binaries it started.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 10 * time.Second
}
