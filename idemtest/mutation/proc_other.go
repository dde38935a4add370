//go:build !unix

package mutation

import (
	"os/exec"
	"time"
)

// killGroup kills go test on cancellation; its test binaries end when
// their output pipes close.
func killGroup(cmd *exec.Cmd) {
	cmd.WaitDelay = 10 * time.Second
}
