package testenv

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child when the test binary
// exits without cleaning up (a panic, a timeout, a killed go test).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
