package server

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Change is a config key whose value differs between the config the
// server runs with and a new one (see Reload).
type Change struct {
	Key      string // its path in the YAML file, e.g. "limits.max_timers"
	Old, New string // the values, formatted; a token's are hidden
	// Live says the change was applied; otherwise it needs a restart.
	Live bool
}

// liveKey reports whether config key can change while the server runs:
// the limits (but max_connections, which the acceptor and the fd limit
// derive from), the timeouts, the snapshot policy, max_fires_per_turn,
// add_only_bound and log_level. The rest (addresses, tick, tokens, the
// data directory, persistence, fsync, ...) needs a restart.
func liveKey(key string) bool {
	switch {
	case key == "limits.max_connections":
		return false
	case strings.HasPrefix(key, "limits."), strings.HasPrefix(key, "timeouts."), strings.HasPrefix(key, "snapshot."):
		return true
	}
	switch key {
	case "max_fires_per_turn", "add_only_bound", "log_level":
		return true
	}
	return false
}

// Reload rereads the client port's TLS files (ReloadTLS: new connections
// get the new certificate) and applies cfg's changes that can be made
// while the server runs (liveKey) on the event loop, and logs each: the ones applied, and the
// others as needing a restart (they are reported again by every Reload
// until then). The limits and add_only_bound are recorded in the log like
// any change of state. cfg's values are checked first (ranges, how the
// limits fit together, and limits.max_name against the tokens in use; Check
// does the rest, as cmd/tickwheel does before calling Reload): an invalid
// config changes nothing and returns the error (a *ConfigError naming the
// key). Tokens are compared as configured (the token files' names, not
// their content). It returns the keys that differ, in the order of the
// Config struct. Safe from any goroutine, after Start; concurrent calls
// run one after the other.
func (s *Server) Reload(ctx context.Context, cfg Config) ([]Change, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	next, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if m := next.Limits.MaxName; len(s.cfg.AdminToken) > m || len(s.cfg.ClientToken) > m {
		return nil, keyErr("limits.max_name", "%d is shorter than a token in use", m)
	}
	// The certificate files are read again whether or not their names
	// changed: renewing a certificate rewrites the same files.
	if err := s.ReloadTLS(); err != nil {
		return nil, err
	}
	changes := diffConfig(s.base, next)
	if len(changes) == 0 {
		s.log.Info("config reloaded: nothing changed")
		return nil, nil
	}
	err = s.onLoop(ctx, func() { s.applyLive(next) })
	if err != nil {
		return nil, fmt.Errorf("server: reload: %w", err)
	}
	for _, c := range changes {
		if c.Live {
			s.log.Info("config reloaded: changed", "key", c.Key, "old", c.Old, "new", c.New)
		} else {
			s.log.Warn("config reloaded: this change needs a restart", "key", c.Key, "running", c.Old, "new", c.New)
		}
	}
	// The live keys are now the new config's; the others still differ.
	base := s.base
	base.Limits, base.Timeouts, base.Snapshot = next.Limits, next.Timeouts, next.Snapshot
	base.Limits.MaxConnections = s.base.Limits.MaxConnections
	base.MaxFiresPerTurn, base.AddOnlyBound, base.LogLevel = next.MaxFiresPerTurn, next.AddOnlyBound, next.LogLevel
	s.base = base
	return changes, nil
}

// applyLive makes next's live settings the server's. Runs on the loop.
func (s *Server) applyLive(next Config) {
	l := next.Limits
	l.MaxConnections = s.maxConns // not live: see liveKey
	s.cfg.Limits = l
	s.cfg.Timeouts = next.Timeouts
	s.tlsHandshake.Store(int64(next.Timeouts.Handshake))
	s.cfg.Snapshot = next.Snapshot
	if p := s.persist; p != nil && p.snapStartAt != 0 && p.snapRetryAt != p.snapFailAt {
		// A changed min_interval counts from the last snapshot's start, as
		// if it had been in force then: the next one no longer comes at
		// the time the old interval set.
		p.snapRetryAt = p.snapStartAt + int64(s.cfg.Snapshot.MinInterval)
	}
	s.cfg.MaxFiresPerTurn = next.MaxFiresPerTurn
	s.cfg.LogLevel = next.LogLevel
	s.core.SetLimits(l)
	if s.cfg.AddOnlyBound != next.AddOnlyBound {
		s.cfg.AddOnlyBound = next.AddOnlyBound
		s.core.SetAddOnlyBound(next.AddOnlyBound)
	}
	s.core.SetWire(s.cfg.wireLimits())
	s.sweepEvery = s.cfg.sweepEvery()
	if now := s.nowNs(); s.sweepEvery > 0 && s.sweepAt > now+int64(s.sweepEvery) {
		s.sweepAt = now + int64(s.sweepEvery)
	}
	s.endTurn() // records the change, and lets firings held by a limit go
	s.postIfMore()
	s.retime()
}

// diffConfig returns the keys whose values differ between a and b.
func diffConfig(a, b Config) []Change {
	var out []Change
	var walk func(prefix string, x, y reflect.Value)
	walk = func(prefix string, x, y reflect.Value) {
		t := x.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			key := prefix + name
			xv, yv := x.Field(i), y.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(key+".", xv, yv)
				continue
			}
			if reflect.DeepEqual(xv.Interface(), yv.Interface()) {
				continue
			}
			c := Change{Key: key, Old: fmt.Sprint(xv.Interface()), New: fmt.Sprint(yv.Interface()), Live: liveKey(key)}
			if strings.HasSuffix(key, "_token") {
				c.Old, c.New = "(hidden)", "(hidden)"
			}
			out = append(out, c)
		}
	}
	walk("", reflect.ValueOf(a), reflect.ValueOf(b))
	return out
}
