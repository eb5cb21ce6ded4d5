package server

import (
	"time"

	"github.com/tickwheel/tickwheel/server/journal"
)

// DefaultDataDir is the data directory when none is configured: relative,
// so it is beside where the server runs (go run ./cmd/tickwheel keeps its
// state in ./tickwheel-data).
const DefaultDataDir = "tickwheel-data"

// The downtime modes (Config.Downtime).
const (
	DowntimeCatchUp = "catch-up"
	DowntimePause   = "pause"
)

// persistenceDefaults completes and checks the persistence settings.
func (c *Config) persistenceDefaults() error {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	switch c.Persistence {
	case "":
		c.Persistence = "on"
	case "on", "off":
	default:
		return keyErr("persistence", "%q: want on or off", c.Persistence)
	}
	if c.Fsync == "" {
		c.Fsync = journal.SyncEverySec.String()
	}
	if _, err := journal.ParseSyncPolicy(c.Fsync); err != nil {
		return keyErr("fsync", "%v", err)
	}
	switch c.Downtime {
	case "":
		c.Downtime = DowntimeCatchUp
	case DowntimeCatchUp, DowntimePause:
	default:
		return keyErr("downtime", "%q: want %s or %s", c.Downtime, DowntimeCatchUp, DowntimePause)
	}
	p := &c.Snapshot
	if p.EveryRecords == 0 {
		p.EveryRecords = 1_000_000
	}
	if p.EveryBytes == 0 {
		p.EveryBytes = 256 << 20
	}
	if p.EveryFirings == 0 {
		p.EveryFirings = 10_000_000
	}
	if p.EveryReplay == 0 {
		p.EveryReplay = time.Second
	}
	switch {
	case p.MinInterval == 0:
		p.MinInterval = 10 * time.Second
	case p.MinInterval < 0:
		p.MinInterval = 0
	}
	if p.Nice < 0 || p.Nice > 19 {
		return keyErr("snapshot.nice", "%d: want 1 to 19, or 0 for the server's own priority", p.Nice)
	}
	switch p.Priority {
	case "":
		p.Priority = SnapshotIdle
	case SnapshotIdle, SnapshotNormal:
	default:
		return keyErr("snapshot.priority", "%q: want %s or %s", p.Priority, SnapshotIdle, SnapshotNormal)
	}
	switch {
	case p.IdleMax == 0:
		p.IdleMax = 30 * time.Second
	case p.IdleMax < time.Second:
		return keyErr("snapshot.idle_max", "%v: want 1s or more", p.IdleMax)
	}
	if p.EveryRecords < 0 {
		return keyErr("snapshot.every_records", "%d: must be positive", p.EveryRecords)
	}
	if p.EveryBytes < 0 {
		return keyErr("snapshot.every_bytes", "%d: must be positive", p.EveryBytes)
	}
	if p.EveryFirings < 0 {
		return keyErr("snapshot.every_firings", "%d: must be positive", p.EveryFirings)
	}
	return nil
}

// persistent reports whether the server keeps its state on disk.
func (c *Config) persistent() bool { return c.Persistence == "on" }
