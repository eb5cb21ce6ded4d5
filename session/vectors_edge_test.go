package session

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestEdgeVectorsAccepted: the requests of protocol/testdata/
// vectors-edge.json get the answers docs/PROTOCOL.md gives them from a
// server with the default limits: every cron form and descriptor is a
// valid schedule, a zero or past delay is due at the next tick, the
// extreme speeds are accepted, a fast-forward past 2^64-2^62 is not, and
// a name of max_name bytes is.
func TestEdgeVectorsAccepted(t *testing.T) {
	b, err := os.ReadFile("../protocol/testdata/vectors-edge.json")
	require.NoError(t, err)
	var f struct {
		Requests []struct{ Name, Hex string } `json:"requests"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	h := newHarness(t, nil)
	a := h.client("a")
	now := a.ping()
	seen := 0
	for _, v := range f.Requests {
		frame, err := hex.DecodeString(v.Hex)
		require.NoError(t, err)
		payload, _, err := protocol.SplitFrame(frame, 1<<20)
		require.NoError(t, err)
		var req protocol.Request
		require.NoError(t, protocol.DecodeRequest(payload, &req))
		switch {
		case strings.HasPrefix(v.Name, "add-schedule-"):
			a.add(req) // fails the test on an error reply
			seen++
		case v.Name == "add-zero", v.Name == "add-past-at":
			assert.Equal(t, now+1, a.add(req), v.Name)
			seen++
		case strings.HasPrefix(v.Name, "set_speed-"):
			a.uints(req)
			seen++
		case v.Name == "fast_forward-max":
			a.failCode(protocol.CodeInvalidArgument, req)
			seen++
		case v.Name == "hello-longest":
			req.Token = testAdminToken
			m := a.call(req)
			require.Equal(t, protocol.KindOK, m.Kind, "%s: %s %s", v.Name, m.Code, m.Text)
			seen++
		}
	}
	assert.Greater(t, seen, 25, "the vectors were found")
}
