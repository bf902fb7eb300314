//go:build !linux

package testenv

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere cleanup relies on Main and
// t.Cleanup.
func setParentDeathSignal(cmd *exec.Cmd) {}
