package session

import (
	"fmt"
	"time"
)

// zoneCache resolves IANA zone names for calendar schedules, remembering
// both the zones found and the names that are not zones: time.LoadLocation
// looks a name up in the machine's zoneinfo directories before the
// embedded copy (time/tzdata), tens to hundreds of microseconds of file
// system calls on the event loop, and an add with an unknown zone used to
// pay them every time (four clients sending such adds made every event
// 250-306 ms late). Owned by the event loop.
//
// Both maps are bounded: found zones by maxKnownZones (there are about
// 600 IANA names; past the bound a zone is loaded again each time), names
// not found by maxUnknownZones (past it the set is emptied and starts
// again). A lookup that was not in the cache counts zoneLookupWork in the
// Core's work (see Core.calendar), so the requests of one connection can
// cause at most readBudget/zoneLookupWork lookups a turn whatever names
// it sends. The cache changes no result, only what it costs.
type zoneCache struct {
	known   map[string]*time.Location
	unknown map[string]struct{}
	// load loads a zone (time.LoadLocation; tests count the calls).
	load   func(name string) (*time.Location, error)
	misses int // lookups that went to load
}

const (
	maxKnownZones   = 4096
	maxUnknownZones = 4096
	// zoneLookupWork is the work (see Core.Work, in units of about one
	// timer walked) a lookup of a zone not in the cache counts for.
	zoneLookupWork = 5000
)

func newZoneCache() *zoneCache {
	return &zoneCache{known: make(map[string]*time.Location), unknown: make(map[string]struct{}), load: time.LoadLocation}
}

// get returns the zone name, from the cache when it was looked up before.
// A nil cache loads it every time.
func (z *zoneCache) get(name string) (*time.Location, error) {
	if z == nil {
		return lookupZone(name, time.LoadLocation)
	}
	if loc := z.known[name]; loc != nil {
		return loc, nil
	}
	if _, ok := z.unknown[name]; ok {
		return nil, errUnknownZone(name)
	}
	z.misses++
	loc, err := lookupZone(name, z.load)
	switch {
	case err == nil && len(z.known) < maxKnownZones:
		z.known[name] = loc
	case err != nil:
		if len(z.unknown) >= maxUnknownZones {
			clear(z.unknown)
		}
		z.unknown[name] = struct{}{}
	}
	return loc, err
}

// lookupZone loads the IANA zone name with load. "Local" is refused: the
// machine's zone would make the schedule depend on where the server (or a
// replay) runs. A name that cannot be an IANA name (too long, or with a
// byte no IANA name has) is refused without a look-up.
func lookupZone(name string, load func(string) (*time.Location, error)) (*time.Location, error) {
	if name == "Local" {
		return nil, fmt.Errorf("zone %q: name an IANA zone such as Europe/Paris, not the machine's", name)
	}
	if !zoneNameSyntax(name) {
		return nil, errUnknownZone(name)
	}
	loc, err := load(name)
	if err != nil {
		return nil, errUnknownZone(name)
	}
	return loc, nil
}

func errUnknownZone(name string) error {
	return fmt.Errorf("zone %q: not a known IANA time zone", name)
}

// zoneNameSyntax reports whether name is made like an IANA zone name:
// letters, digits, '_', '-', '+' and '/' (between parts), at most
// MaxZoneLen bytes.
func zoneNameSyntax(name string) bool {
	if len(name) == 0 || len(name) > MaxZoneLen || name[0] == '/' || name[len(name)-1] == '/' {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '_', b == '-', b == '+':
		case b == '/' && name[i-1] != '/':
		default:
			return false
		}
	}
	return true
}
