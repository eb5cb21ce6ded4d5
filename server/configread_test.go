//go:build unix

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadWithin runs LoadConfig, failing the test if it does not return
// within a minute (it then leaks its goroutine: the test has failed). The
// bound catches a load that blocks (a FIFO waits for a writer forever),
// not a slow one: parsing 40,000 keys takes seconds under -race on a
// loaded machine, and which check refused a file shows in its error.
func loadWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := LoadConfig(path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("LoadConfig(%s) did not return", path)
		return nil
	}
}

// TestConfigReadsRegularFilesOnly: a FIFO (which blocked a reload, and so
// SIGTERM, until someone wrote to it), a device (/dev/zero grew to 2 GiB
// in 3 s) and a directory are refused at once; so is a file over
// MaxConfigBytes. A symbolic link to a config file is fine.
func TestConfigReadsRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	err := loadWithin(t, fifo)
	require.ErrorContains(t, err, "not a regular file")
	assert.ErrorContains(t, LocateConfigError(keyErr("tick", "bad"), fifo, nil), "tick: bad", "LocateConfigError must not wait on a FIFO either")

	if _, statErr := os.Stat("/dev/zero"); statErr == nil {
		require.ErrorContains(t, loadWithin(t, "/dev/zero"), "not a regular file")
	}
	require.ErrorContains(t, loadWithin(t, dir), "not a regular file")

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("tick: 10ms\n"+strings.Repeat("# padding\n", MaxConfigBytes/10+1)), 0o600))
	require.ErrorContains(t, loadWithin(t, big), fmt.Sprintf("larger than %d bytes", MaxConfigBytes))

	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("tick: 5ms\n"), 0o600))
	link := filepath.Join(dir, "link.yaml")
	require.NoError(t, os.Symlink(good, link))
	cfg, err := LoadConfig(link)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Millisecond, cfg.Tick)
}

// TestConfigManyKeys: a mapping of many keys is refused before yaml.v3's
// duplicate check, quadratic in them, runs (40,000 unknown keys took 7 s);
// many unknown keys under the bound report the first maxConfigErrors and a
// count of the rest.
func TestConfigManyKeys(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 40_000 {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	many := filepath.Join(dir, "many.yaml")
	require.NoError(t, os.WriteFile(many, []byte(b.String()), 0o600))
	begin := time.Now()
	err := loadWithin(t, many)
	// This error comes from the count, made before the duplicate check
	// runs: with the check first the error would list unknown keys.
	require.ErrorContains(t, err, "a mapping of 40000 keys (at most 256)")
	t.Logf("40,000 keys refused in %v", time.Since(begin))

	b.Reset()
	for i := range maxConfigKeys {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	some := filepath.Join(dir, "some.yaml")
	require.NoError(t, os.WriteFile(some, []byte(b.String()), 0o600))
	err = loadWithin(t, some)
	require.ErrorContains(t, err, "line 1, key k0: unknown key")
	require.ErrorContains(t, err, fmt.Sprintf("%d more errors", maxConfigKeys-maxConfigErrors))
	assert.NotContains(t, err.Error(), fmt.Sprintf("key k%d:", maxConfigErrors))
}
