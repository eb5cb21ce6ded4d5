package server

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Config configures a Server. The zero value of every field means its
// default, listed beside it; configs/tickwheel.yaml documents each key.
type Config struct {
	// Addr is the TCP address to listen on. Default "127.0.0.1:7420".
	// Port 0 picks a free port; Server.Addr reports the real one.
	Addr string `yaml:"addr"`
	// Tick is the duration of one tw-time tick. Default 10ms.
	Tick time.Duration `yaml:"tick"`
	// StartTick is tw-time at start. Default: the current Unix time in ticks.
	StartTick uint64 `yaml:"start_tick"`
	// Frozen starts tw-time frozen: it then moves only by admin fast-forward.
	Frozen bool `yaml:"frozen"`
	// Speed is the initial tw-time speed (1 = real time). Default 1.
	Speed float64 `yaml:"speed"`

	// AdminToken, when set, is the hello token that grants admin ops. When
	// empty, admin ops are accepted only from loopback connections.
	AdminToken string `yaml:"admin_token"`
	// ClientToken, when set, is required in hello from every client (the
	// admin token is accepted too).
	ClientToken string `yaml:"client_token"`
	// AddOnlyBound restricts add (and cancel, pause, resume, cancel_all) to
	// receivers the session has bound. By default any session may schedule
	// timers for any receiver.
	AddOnlyBound bool `yaml:"add_only_bound"`

	Limits Limits `yaml:"limits"`

	// MaxFiresPerTurn bounds the firings done in one event-loop turn, so a
	// burst of expiries or a long catch-up cannot stall other sessions.
	// Default 10000.
	MaxFiresPerTurn int `yaml:"max_fires_per_turn"`
}

// Limits protect the server. Each zero field means its default.
type Limits struct {
	MaxFrame               int `yaml:"max_frame"`                 // bytes in one frame, header excluded. Default 65536.
	MaxData                int `yaml:"max_data"`                  // bytes of data on one timer. Default 4096.
	MaxTimersPerReceiver   int `yaml:"max_timers_per_receiver"`   // Default 100000.
	MaxTimers              int `yaml:"max_timers"`                // timers in the server. Default 10000000.
	MaxReceiversPerSession int `yaml:"max_receivers_per_session"` // bound at once. Default 100000.
	MaxBacklog             int `yaml:"max_backlog"`               // events kept per unbound receiver; the oldest are dropped. Default 10000.
	MaxBacklogTotal        int `yaml:"max_backlog_total"`         // events kept in all backlogs together; past it new events are dropped. Default 1000000.
	MaxOutbound            int `yaml:"max_outbound"`              // bytes queued to one connection before it is closed as not reading. Default 8 MiB.
}

const (
	defaultAddr = "127.0.0.1:7420"
	defaultTick = 10 * time.Millisecond
)

// withDefaults returns c with every zero field set to its default, or an
// error naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.Tick == 0 {
		c.Tick = defaultTick
	}
	if c.Speed == 0 {
		c.Speed = 1
	}
	if c.MaxFiresPerTurn == 0 {
		c.MaxFiresPerTurn = 10_000
	}
	l := &c.Limits
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxFrame, 64<<10)
	def(&l.MaxData, 4096)
	def(&l.MaxTimersPerReceiver, 100_000)
	def(&l.MaxTimers, 10_000_000)
	def(&l.MaxReceiversPerSession, 100_000)
	def(&l.MaxBacklog, 10_000)
	def(&l.MaxBacklogTotal, 1_000_000)
	def(&l.MaxOutbound, 8<<20)
	switch {
	case c.Tick < time.Microsecond:
		return c, fmt.Errorf("config: tick %v is below 1µs", c.Tick)
	case c.MaxFiresPerTurn < 0:
		return c, errors.New("config: max_fires_per_turn must be positive")
	case l.MaxFrame < 64 || l.MaxFrame > 64<<20:
		return c, fmt.Errorf("config: limits.max_frame %d out of range 64..64MiB", l.MaxFrame)
	case l.MaxData < 0 || l.MaxData > l.MaxFrame-64:
		return c, fmt.Errorf("config: limits.max_data %d must fit in a frame (max_frame - 64)", l.MaxData)
	case l.MaxTimersPerReceiver < 0 || l.MaxTimers < 0 || l.MaxReceiversPerSession < 0 || l.MaxBacklog < 0 || l.MaxBacklogTotal < 0:
		return c, errors.New("config: limits must not be negative")
	case l.MaxOutbound < 2*l.MaxFrame:
		return c, fmt.Errorf("config: limits.max_outbound %d must be at least twice max_frame", l.MaxOutbound)
	}
	return c, nil
}

// LoadConfig reads a YAML config file. Unknown keys are an error, so a typo
// does not silently fall back to a default.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}
