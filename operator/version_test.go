package operator

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/server"
)

// TestBuildInfo: /metrics has tickwheel_build_info 1 labelled with the
// running build, and /status.json carries the same version.
func TestBuildInfo(t *testing.T) {
	_, hs := newTestOperator(t)
	b := server.Build()
	fams := scrape(t, hs.URL, "")
	assert.Equal(t, 1.0, value(t, fams, "tickwheel_build_info",
		"version", b.Version, "revision", b.Revision, "goversion", b.GoVersion))

	resp, err := http.Get(hs.URL + "/status.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		Version  string `json:"version"`
		Revision string `json:"revision"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	assert.Equal(t, server.Version, st.Version)
	assert.Equal(t, b.Revision, st.Revision)
}
