//go:build !linux

package execstore

import "os/exec"

// setProcAttr does nothing here: the process group and the parent-death
// signal are Linux's.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the store's process.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
