package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Dockerfile builds the binary with exactly the command .ci/run checks
// (no Docker engine runs in CI), and the systemd unit's command lines are
// ones this binary accepts: its ExecStartPre's -config-check passes on the
// sample config, and its ExecStart's flags parse.
func TestPackagingCommands(t *testing.T) {
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(packageDir, "../..", rel))
		require.NoError(t, err)
		return string(b)
	}
	build := regexp.MustCompile(`CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o \S+ \./cmd/tickwheel`)
	docker, ci := build.FindString(read("Dockerfile")), build.FindString(read(".ci/run"))
	require.NotEmpty(t, docker, "the Dockerfile's go build")
	require.NotEmpty(t, ci, ".ci/run's go build")
	strip := func(s string) string { return regexp.MustCompile(`-o \S+`).ReplaceAllString(s, "-o OUT") }
	require.Equal(t, strip(ci), strip(docker))

	unit := read("configs/tickwheel.service")
	exec := func(key string) []string {
		m := regexp.MustCompile(`(?m)^` + key + `=/usr/local/bin/tickwheel (.*)$`).FindStringSubmatch(unit)
		require.NotNil(t, m, key)
		args := strings.Fields(strings.ReplaceAll(m[1], "%S", t.TempDir()))
		for i, a := range args { // the config is installed from configs/
			if a == "/etc/tickwheel/tickwheel.yaml" {
				args[i] = filepath.Join(packageDir, "../../configs/tickwheel.yaml")
			}
		}
		return args
	}
	var out, errOut syncBuffer
	require.Equal(t, 0, run(exec("ExecStartPre"), &out, &errOut), errOut.String())
	args := exec("ExecStart")
	require.Equal(t, "serve", args[0])
	_, _, err := serveConfig(args[1:], func(string) string { return "" }, &errOut)
	require.NoError(t, err)
}
