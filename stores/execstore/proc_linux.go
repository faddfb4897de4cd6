package execstore

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the store in a process group of its own (so a kill
// reaches the shell's children too) and has the kernel kill it when its
// parent dies: a worker process killed by the harness takes its store
// with it, as a crashed API process takes its store client.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the store's process group with SIGKILL.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
