package loadtest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the spawned server when this process
// dies (a test binary killed, a ^C): otherwise its servers live on, holding
// their ports, and a later run's node may talk raft to them (a cluster
// nemesis run once followed a leader address that was such an orphan's).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
