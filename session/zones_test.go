package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
)

// TestUnknownZoneLookedUpOnce: adds with an unknown zone name look it up
// once (the file system, on the event loop), not once per add; a known
// zone is loaded once too. Each look-up counts zoneLookupWork, so one
// connection's turn holds a bounded number of them.
func TestUnknownZoneLookedUpOnce(t *testing.T) {
	h, s := schedHarness(t)
	h.c.sched.zones = newZoneCache()
	h.c.sched.cals = make(map[calKey]*calendar)
	loads := 0
	h.c.sched.zones.load = func(name string) (*time.Location, error) {
		loads++
		return time.LoadLocation(name)
	}
	add := func(tid uint64, sched, zone string) protocol.Message {
		return h.do(s, protocol.Request{Op: protocol.OpAdd, ID: tid, Receiver: schedRecv, Tid: tid, Schedule: sched, Zone: zone})[0]
	}
	for i := range 100 {
		work := h.c.Work()
		m := add(uint64(i+1), fmt.Sprintf("%d 4 * * *", i%60), "Mars/Olympus_Mons")
		require.Equal(t, protocol.CodeInvalidArgument, m.Code)
		require.Contains(t, m.Text, `zone "Mars/Olympus_Mons": not a known IANA time zone`)
		if i == 0 {
			assert.GreaterOrEqual(t, h.c.Work()-work, zoneLookupWork, "a look-up counts as work")
		} else {
			assert.Less(t, h.c.Work()-work, zoneLookupWork, "a cached answer does not")
		}
	}
	assert.Equal(t, 1, loads, "the unknown name was looked up once")
	for i := range 10 {
		m := add(uint64(i+1), fmt.Sprintf("%d 4 * * *", i), "Europe/Paris")
		require.Equal(t, protocol.KindOK, m.Kind, m.Text)
	}
	assert.Equal(t, 2, loads, "and the known one once")
}

// TestZoneCacheBounded: random unknown names do not grow the cache past
// maxUnknownZones, and names that cannot be zones are refused without a
// look-up.
func TestZoneCacheBounded(t *testing.T) {
	z := newZoneCache()
	loads := 0
	z.load = func(string) (*time.Location, error) { loads++; return nil, fmt.Errorf("no") }
	for i := range 3 * maxUnknownZones {
		_, err := z.get(fmt.Sprintf("No/Zone%d", i))
		require.Error(t, err)
		require.LessOrEqual(t, len(z.unknown), maxUnknownZones)
	}
	assert.Equal(t, 3*maxUnknownZones, loads)
	for _, bad := range []string{"../../etc/passwd", "/etc/localtime", "Europe//Paris", "Europe/Paris/", "a b", "Local", "zone.tab"} {
		_, err := z.get(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, 3*maxUnknownZones, loads, "refused without a look-up")
	for _, good := range []string{"Europe/Paris", "Etc/GMT+5", "America/Argentina/ComodRivadavia", "UTC", "America/Port-au-Prince"} {
		assert.True(t, zoneNameSyntax(good), good)
	}
}

// BenchmarkUnknownZone: the cost of an unknown zone name looked up
// (uncached: what every add with one used to pay) and answered from the
// cache.
func BenchmarkUnknownZone(b *testing.B) {
	b.Run("lookup", func(b *testing.B) {
		for range b.N {
			_, _ = time.LoadLocation("Mars/Olympus_Mons")
		}
	})
	b.Run("cached", func(b *testing.B) {
		z := newZoneCache()
		for range b.N {
			_, _ = z.get("Mars/Olympus_Mons")
		}
	})
}
