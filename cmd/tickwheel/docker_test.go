package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/client"
)

// dockerImage is what the Dockerfile makes the container run: its
// ENTRYPOINT and CMD, ENV and WORKDIR, with the paths of its COPY lines
// (from the build context) and of its VOLUME mapped to this machine.
type dockerImage struct {
	entrypoint, cmd []string
	env             []string
	workdir         string
	copies          map[string]string // destination in the image → source in the repository
	volume          string
}

// readDockerfile parses the Dockerfile's last stage (the image): its
// exec-form ENTRYPOINT and CMD, ENV, WORKDIR, VOLUME and COPY lines.
func readDockerfile(t *testing.T) dockerImage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(packageDir, "../../Dockerfile"))
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	if i := strings.LastIndex(text, "\nFROM "); i >= 0 {
		text = text[i:]
	}
	img := dockerImage{copies: map[string]string{}}
	jsonArray := func(s string) []string {
		var v []string
		require.NoError(t, json.Unmarshal([]byte(s), &v), "not an exec-form array: %s", s)
		return v
	}
	for _, line := range strings.Split(text, "\n") {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "ENTRYPOINT":
			img.entrypoint = jsonArray(rest)
		case "CMD":
			img.cmd = jsonArray(rest)
		case "ENV":
			img.env = append(img.env, strings.Fields(rest)...)
		case "WORKDIR":
			img.workdir = rest
		case "VOLUME":
			v := jsonArray(rest)
			require.Len(t, v, 1, "one volume")
			img.volume = v[0]
		case "COPY":
			f := strings.Fields(rest)
			if !strings.HasPrefix(f[0], "--") { // from the build context, not a build stage
				img.copies[f[1]] = filepath.Join(packageDir, "../..", f[0])
			}
		}
	}
	require.NotEmpty(t, img.entrypoint, "ENTRYPOINT")
	require.NotEmpty(t, img.cmd, "CMD")
	require.NotEmpty(t, img.volume, "VOLUME")
	return img
}

// local maps a path in the image to this machine: a COPY's destination to
// its source, a path in the volume to vol.
func (img *dockerImage) local(arg, vol string) string {
	if src, ok := img.copies[arg]; ok {
		return src
	}
	if rest, ok := strings.CutPrefix(arg, img.volume); ok {
		return vol + rest
	}
	return arg
}

// TestDockerfileStarts: `docker run` of the image with no token given
// starts protected (issue 28: it exited, refused by protected mode). The
// container's command, run here as the image runs it with the built binary
// (no Docker engine here), passes -config-check as it is (listening on
// 0.0.0.0); started (on loopback: tests listen nowhere else) it makes a
// client token in the volume at first start, logs where, refuses clients
// without it, accepts them with it, and keeps it across restarts. A token
// given with TICKWHEEL_CLIENT_TOKEN wins, and then none is made.
func TestDockerfileStarts(t *testing.T) {
	img := readDockerfile(t)
	bin := filepath.Join(t.TempDir(), "tickwheel")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = packageDir
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	require.Equal(t, "/usr/local/bin/tickwheel", img.entrypoint[0], "the ENTRYPOINT is the binary")

	vol := t.TempDir()
	command := func(listen bool, extra ...string) *exec.Cmd {
		var args []string
		for _, a := range append(append(append([]string{}, img.entrypoint[1:]...), img.cmd...), extra...) {
			a = img.local(a, vol)
			if listen && strings.HasPrefix(a, "0.0.0.0:") {
				a = "127.0.0.1:0" // loopback only in tests
			}
			args = append(args, a)
		}
		c := exec.Command(bin, args...)
		c.Dir = img.local(img.workdir, vol)
		c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + vol}, img.env...)
		return c
	}

	// As the image runs it, with no token in the environment.
	check := command(false, "-config-check")
	out, err = check.CombinedOutput()
	require.NoError(t, err, "the container's command fails -config-check: %s", out)
	assert.Contains(t, string(out), "tickwheel.yaml: OK")

	tokenPath := filepath.Join(vol, "tickwheel-data", "client.token")
	addr, logs, stop := startContainer(t, command(true))
	assert.Regexp(t, `level=INFO msg="client token: every client must give the token in this file in its hello" file=`+
		regexp.QuoteMeta(tokenPath)+` created=true`, logs())
	fi, err := os.Stat(tokenPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tok, err := os.ReadFile(tokenPath)
	require.NoError(t, err)
	token := strings.TrimSpace(string(tok))
	assert.Len(t, token, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.Dial(ctx, addr, client.WithToken(""))
	assert.True(t, errors.Is(err, client.ErrUnauthorized), "a client without the token: %v", err)
	c, err := client.Dial(ctx, addr, client.WithToken(token))
	require.NoError(t, err)
	_, err = c.Ping(ctx)
	require.NoError(t, err)
	c.Close()
	stop()

	// The next start keeps the token.
	addr, logs, stop = startContainer(t, command(true))
	assert.Contains(t, logs(), "file="+tokenPath+" created=false")
	c, err = client.Dial(ctx, addr, client.WithToken(token))
	require.NoError(t, err)
	c.Close()
	stop()

	// A token of one's own wins; none is made.
	vol = t.TempDir()
	own := command(true)
	own.Env = append(own.Env, envClientToken+"=my-own-client-token")
	addr, logs, stop = startContainer(t, own)
	defer stop()
	assert.NotContains(t, logs(), "client.token")
	_, err = os.Stat(filepath.Join(vol, "tickwheel-data", "client.token"))
	assert.True(t, os.IsNotExist(err), "client.token made though a token was given")
	c, err = client.Dial(ctx, addr, client.WithToken("my-own-client-token"))
	require.NoError(t, err)
	c.Close()
}

// startContainer starts cmd, waits for "tickwheel listening on ADDR" and
// returns the address, the log so far (stderr) and a stop that sends
// SIGTERM and waits for a clean exit.
func startContainer(t *testing.T, cmd *exec.Cmd) (addr string, logs func() string, stop func()) {
	t.Helper()
	var errOut syncBuffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			assert.NoError(t, cmd.Wait(), "exit: %s", errOut.String())
		})
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "tickwheel listening on "); ok {
				found <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(found)
	}()
	select {
	case addr = <-found:
	case <-time.After(30 * time.Second):
	}
	require.NotEmpty(t, addr, "the container's command did not listen: %s", errOut.String())
	return addr, errOut.String, stop
}
