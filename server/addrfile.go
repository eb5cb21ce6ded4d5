package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// AddrFileName is the file beside the data directory's admin.token in which
// a server whose admin token is that file's records the client address it
// listens on and its process id ("127.0.0.1:7420 1234\n", mode 0600). The
// CLI on the same machine sends the data directory's admin token only to
// that address, and only while that process runs: never to whatever else
// listens on a loopback port (another user's process, once the server is
// gone). The server writes it when it starts listening and removes it when
// it stops, if it is still its own.
const AddrFileName = "server.addr"

// addrFilePath is the path of the server's address file, or "" when its
// admin token is configured (not the data directory's): then the CLI does
// not read the token by itself.
func (s *Server) addrFilePath() string {
	if s.base.AdminToken != "" || s.base.AdminTokenFile != "" {
		return ""
	}
	return filepath.Join(s.cfg.DataDir, AddrFileName)
}

// addrFileContent is what the address file holds for this process.
func (s *Server) addrFileContent() string { return fmt.Sprintf("%s %d\n", s.addr, os.Getpid()) }

// writeAddrFile records the listening address for the CLI (see
// AddrFileName). A failure is logged: the CLI then needs the token given.
func (s *Server) writeAddrFile() {
	path := s.addrFilePath()
	if path == "" {
		return
	}
	if err := replaceFile(path, s.addrFileContent(), false); err != nil {
		s.log.Warn("cannot record the listening address for the CLI: local commands need -token-file", "file", path, "err", err)
	}
}

// removeAddrFile removes the address file if it is still this server's.
func (s *Server) removeAddrFile() {
	path := s.addrFilePath()
	if path == "" {
		return
	}
	if b, err := os.ReadFile(path); err == nil && string(b) == s.addrFileContent() {
		os.Remove(path)
	}
}

// ReadAddrFile returns the address and process id recorded in the address
// file of data directory dir (see AddrFileName).
func ReadAddrFile(dir string) (addr string, pid int, err error) {
	path := filepath.Join(dir, AddrFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	a, p, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if pid, err = strconv.Atoi(p); !ok || err != nil || pid <= 0 {
		return "", 0, fmt.Errorf("%s: want \"HOST:PORT PID\", got %q", path, b)
	}
	return a, pid, nil
}
