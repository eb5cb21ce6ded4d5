package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
)

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run(args, &out, &errb), args)
		assert.Equal(t, server.Build().String()+"\n", out.String(), args)
		assert.True(t, strings.HasPrefix(out.String(), "tickwheel "+server.Version+" ("), out.String())
		assert.Empty(t, errb.String())
	}
	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"version", "-json"}, &out, &out))
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &v), out.String())
	assert.Equal(t, server.Version, v.Version)
	assert.Equal(t, server.Build().GoVersion, v.GoVersion)
	out.Reset()
	run([]string{"-h"}, &out, &out)
	assert.Contains(t, out.String(), "version")
}
