package server

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuildInfo(t *testing.T) {
	b := Build()
	assert.Equal(t, Version, b.Version)
	assert.Equal(t, runtime.Version(), b.GoVersion)
	assert.Equal(t, "tickwheel 0.1.0 (revision abc, modified; go1.2)",
		BuildInfo{Version: "0.1.0", Revision: "abc", Modified: true, GoVersion: "go1.2"}.String())
	assert.Equal(t, "tickwheel 0.1.0 (revision unknown; go1.2)",
		BuildInfo{Version: "0.1.0", GoVersion: "go1.2"}.String())
}
