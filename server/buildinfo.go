package server

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// BuildInfo says which build of tickwheel is running: the release
// version, and the VCS revision the binary was built from when the Go
// toolchain recorded one (a build inside a git checkout does; `go run`
// and a build from a module download may not).
type BuildInfo struct {
	Version   string // the release version, Version
	Revision  string // the VCS revision (commit hash), "" when not recorded
	Modified  bool   // the work tree had uncommitted changes at build time
	GoVersion string // the Go toolchain that built the binary
}

// String is the one-line form `tickwheel version` prints, e.g.
// "tickwheel 0.1.0 (revision 1a2b3c4d5e6f, modified; go1.26.8)".
func (b BuildInfo) String() string {
	s := "tickwheel " + b.Version + " ("
	switch {
	case b.Revision == "":
		s += "revision unknown"
	default:
		s += "revision " + b.Revision
	}
	if b.Modified {
		s += ", modified"
	}
	return s + "; " + b.GoVersion + ")"
}

var buildOnce = sync.OnceValue(func() BuildInfo {
	b := BuildInfo{Version: Version, GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
})

// Build returns the running binary's build information. Safe from any
// goroutine.
func Build() BuildInfo { return buildOnce() }
