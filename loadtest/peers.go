package loadtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Default addresses of the external peers, as loadtest/peers.sh starts them.
const (
	DefaultRedisAddr      = "127.0.0.1:6390"
	DefaultBeanstalkdAddr = "127.0.0.1:11390"
	DefaultPeersDir       = "/tmp/tickwheel-peers"
)

// PeerPID finds the pid of the process serving a peer at addr, to report
// its CPU and RSS: first the process that owns the listening TCP socket on
// addr's port (from /proc/net/tcp{,6} and /proc/*/fd; needs permission to
// read other processes' fds, e.g. root or the same user), then the pid file
// peers.sh wrote (DefaultPeersDir/NAME.pid). It returns how it found it.
func PeerPID(addr, name string) (int, string, error) {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, "", err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, "", err
	}
	if pid, err := listenerPID(port); err == nil {
		return pid, "listening socket", nil
	}
	f := filepath.Join(DefaultPeersDir, name+".pid")
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, "", fmt.Errorf("no process found listening on port %d, and no pid file: %w", port, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", f, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return 0, "", fmt.Errorf("%s: pid %d is not running", f, pid)
	}
	return pid, f, nil
}

// listenerPID returns the pid owning a TCP socket listening on port.
func listenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A = LISTEN
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if p, err := strconv.ParseUint(fs[1][i+1:], 16, 32); err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, err := os.ReadDir(p + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(p + "/fd/" + fd.Name()); err == nil && inodes[l] {
				return strconv.Atoi(filepath.Base(p))
			}
		}
	}
	return 0, fmt.Errorf("the socket listening on port %d belongs to no process we can see", port)
}
