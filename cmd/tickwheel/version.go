package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/tickwheel/tickwheel/server"
)

// isVersion reports whether args ask for the version: `tickwheel version`,
// `tickwheel -version` or `--version`, with -json optionally after it.
func isVersion(args []string) bool {
	if len(args) == 0 || len(args) > 2 || !slices.Contains([]string{"version", "-version", "--version"}, args[0]) {
		return false
	}
	return len(args) == 1 || args[1] == "-json" || args[1] == "--json"
}

// versionCmd prints the build: one line, or with -json an object
// {version, revision, modified, go_version}.
func versionCmd(args []string, stdout io.Writer) int {
	b := server.Build()
	if len(args) == 2 {
		_ = json.NewEncoder(stdout).Encode(map[string]any{
			"version": b.Version, "revision": b.Revision, "modified": b.Modified, "go_version": b.GoVersion})
		return 0
	}
	fmt.Fprintln(stdout, b)
	return 0
}
