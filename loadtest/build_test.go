package loadtest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// buildServer builds ../cmd/tickwheel into the test's temporary directory
// and returns the binary's path, for the tests that spawn real servers.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tickwheel")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tickwheel")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the server: %v\n%s", err, out)
	}
	return bin
}
