package server

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/session"
	"github.com/tickwheel/tickwheel/wheel"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
	"github.com/tickwheel/tickwheel/server/tlsconf"
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

	// AdminToken is the hello token that grants admin ops. When it and
	// AdminTokenFile are empty, the server takes it from <DataDir>/admin.token,
	// creating that file at first start (see Security below).
	AdminToken string `yaml:"admin_token"`
	// ClientToken, when set, is required in hello from every client (the
	// admin token is accepted too). Without it, hellos without a token are
	// accepted, which listening beyond loopback needs Insecure for.
	ClientToken string `yaml:"client_token"`
	// AddOnlyBound restricts add (and cancel, pause, resume, cancel_all) to
	// receivers the session has bound. By default any session may schedule
	// timers for any receiver.
	AddOnlyBound bool `yaml:"add_only_bound"`

	// Security. The admin token always exists: AdminToken, or the content of
	// AdminTokenFile, or <DataDir>/admin.token. New refuses a config that
	// would listen beyond loopback with no client token, unless Insecure.

	// DataDir holds the server's files: the write-ahead log and snapshots
	// (in log/), and admin.token (mode 0600, in a 0700 directory), made at
	// first start when no admin token is configured. Default
	// "tickwheel-data", in the directory the server runs in.
	DataDir string `yaml:"data_dir"`
	// AdminTokenFile, when set, names a file holding the admin token (its
	// content with surrounding white space removed); not with AdminToken.
	AdminTokenFile string `yaml:"admin_token_file"`
	// ClientTokenFile, when set, names a file holding the client token; not
	// with ClientToken.
	ClientTokenFile string `yaml:"client_token_file"`
	// ClientTokenAuto, when no client token is configured (ClientToken,
	// ClientTokenFile, or in cmd/tickwheel $TICKWHEEL_CLIENT_TOKEN), takes
	// it from <DataDir>/client.token, creating that file at first start as
	// admin.token is made (32 random bytes in hex, mode 0600, in a 0700
	// directory), and logs its path: a server that must listen beyond
	// loopback (a container) starts protected with no secret to hand in.
	// Clients then need the file's content. A configured token wins.
	ClientTokenAuto bool `yaml:"client_token_auto"`
	// Insecure lets the server listen on a non-loopback address (0.0.0.0, a
	// LAN address, a host name) with no client token: any host that can
	// connect may then use every receiver and timer. It is logged as a warning.
	Insecure bool `yaml:"insecure"`

	Limits Limits `yaml:"limits"`

	// Persistence is "on" (the default: every timer, backlog and tw-time
	// survive a restart and a crash, see docs/ARCHITECTURE.md) or "off"
	// (in memory only: everything is lost at exit).
	Persistence string `yaml:"persistence"`
	// Fsync is when the log is flushed to disk, like Redis's appendfsync:
	// "always" (a reply leaves only once its change is on disk; one fsync
	// per event-loop turn covers all of that turn's requests), "everysec"
	// (the default: about once a second; a power loss can lose the last
	// second of acknowledged changes, a process crash loses none), or "no"
	// (the OS decides; at exit too).
	Fsync string `yaml:"fsync"`
	// Snapshot sets when the state is written whole, so the log before it
	// can be deleted and a restart replays little.
	Snapshot SnapshotPolicy `yaml:"snapshot"`
	// Downtime is what tw-time does while the server was down: "catch-up"
	// (the default: it moves on by the wall-clock time that passed, and
	// every timer due in the gap fires at once, in order) or "pause" (it
	// goes on from where it stopped, as if no time had passed).
	Downtime string `yaml:"downtime"`
	// Repair (flag -repair) lets the server start on a damaged log:
	// one with a bad record the newest snapshot does not cover, cut there
	// (everything before it is kept), or one whose end is missing (a
	// deleted or truncated last segment: the log's TAIL file records how
	// far it reached). Nothing is deleted: a copy of the cut segment, every
	// later segment and the TAIL file go into log/repaired-<time>/, and the
	// start logs the records and timers lost. Without it such a log stops
	// the start with an error naming the file and offset (or the missing
	// records) and what a repair would lose. A torn last record (a crash
	// mid-write) is always cut, and a bad record the snapshot covers
	// skipped, without it.
	Repair bool `yaml:"repair"`
	// logFS is the log's file layer (journal.Options.FS): nil, the
	// operating system's; tests set a vfs.Faulty to fail the disk.
	logFS vfs.FS

	// Timeouts close connections that hold resources without using them.
	// Zero means the default; a negative value turns the timeout off.
	Timeouts Timeouts `yaml:"timeouts"`

	// LogLevel is the level of the log: debug, info (the default), warn or
	// error. The server logs through the logger New is given, so it only
	// checks this; cmd/tickwheel sets its logger's level from it (a
	// -log-level flag beats it), and again on SIGHUP.
	LogLevel string `yaml:"log_level"`
	// LogFormat is the log's format: "text" (the default: key=value
	// lines, log/slog's TextHandler) or "json" (one JSON object a line,
	// slog's JSONHandler, for log shippers). Like LogLevel, the server only
	// checks it; cmd/tickwheel builds its logger with it (a -log-format
	// flag beats it). It needs a restart: a reload logs a change of it as
	// such.
	LogFormat string `yaml:"log_format"`
	// Metrics keeps the event loop's turn duration and fire lateness
	// histograms (ReadMetrics): a clock read at the end of each loop turn
	// (two for a doorbell turn, one more when it fired timers), and a
	// note per late firing. The counters are kept either way.
	// cmd/tickwheel turns it on with its operator HTTP listener.
	Metrics bool `yaml:"-"`
	// RestGnetPool releases gnet's package-wide goroutine pool while the
	// server is idle (it wakes twice a second otherwise) and starts it
	// again before the next connection is registered (gnetpool.go). Only
	// for a process that is the server's alone: another user of gnet in
	// the same process would find the pool closed. cmd/tickwheel sets it.
	RestGnetPool bool `yaml:"-"`
	// HTTPAddr is the operator HTTP listener's address (metrics, health,
	// pprof, status page), which cmd/tickwheel starts beside the server
	// (package operator). Default "127.0.0.1:7421"; "off" turns it off.
	HTTPAddr string `yaml:"http_addr"`
	// HTTP bounds the operator HTTP listener's connections (see HTTPLimits).
	HTTP HTTPLimits `yaml:"http"`

	// TLS turns on TLS on the client port (every client connection is then
	// TLS; docs/OPERATIONS.md "TLS and mTLS"): cert_file and key_file, PEM;
	// client_ca_file, when set, requires a client certificate signed by it
	// (mTLS); min_version "1.3" (default) or "1.2". The handshake counts
	// towards timeouts.handshake and limits.max_connections. SIGHUP rereads
	// the files (Server.ReloadTLS); a change of the keys needs a restart.
	// Off by default.
	TLS tlsconf.Files `yaml:"tls"`

	// Cluster makes the server a node of a raft cluster (cluster_config.go);
	// off by default.
	Cluster ClusterConfig `yaml:"cluster"`

	// MaxFiresPerTurn bounds the firings done in one event-loop turn, so a
	// burst of expiries or a long catch-up cannot stall other sessions.
	// Default 10000.
	MaxFiresPerTurn int `yaml:"max_fires_per_turn"`

	// MaxListWalkPerTurn bounds the work `list` requests do in one
	// event-loop turn to gather their pages, all sessions' together:
	// timers walked in the receiver's list, tids looked up in the index,
	// timers put in the page (the turn that makes a page may put a whole
	// page in). A page that needs more is gathered over several turns
	// (its reply a few turns later), so that it never makes a long turn:
	// each unit is a cache miss at 100M timers, up to 6.7 µs on a cold
	// cache. Default 1024. Restart to change it.
	MaxListWalkPerTurn int `yaml:"max_list_walk_per_turn"`

	// MemoryLimit is the process's soft memory limit in bytes
	// (debug.SetMemoryLimit): 0 (the default) derives it from the byte
	// budgets, the timers and the connections (memlimit.go, docs/OPERATIONS.md
	// "Memory"); a negative value sets none. A GOMEMLIMIT in the
	// environment beats it: the server then leaves the runtime's limit.
	MemoryLimit int64 `yaml:"memory_limit"`

	// GCPercent is the collector's pace (debug.SetGCPercent, GOGC): 0 (the
	// default) derives it from the timers' bytes in the heap, 100 up to
	// 64 MiB of them and less above, down to 10 (gcpace.go, docs/OPERATIONS.md
	// "Memory at tens of millions of timers"); a positive value is the
	// percent; a negative one leaves the runtime's (100). A GOGC in the
	// environment beats it: the server then leaves the runtime's pace.
	GCPercent int `yaml:"gc_percent"`
}

// Limits protect the server (see session.Limits for each field).
type Limits = session.Limits

// SnapshotPolicy sets when snapshots are taken (besides at a graceful stop):
// after EveryRecords log records (event-loop turns that changed state) or
// EveryBytes bytes of log, whichever comes first, but not within
// MinInterval of the last one; and after EveryFirings firings, at once.
type SnapshotPolicy struct {
	EveryRecords int   `yaml:"every_records"` // Default 1000000.
	EveryBytes   int64 `yaml:"every_bytes"`   // Default 256 MiB.
	// EveryFirings bounds a restart's replay by its cost: once the log
	// records since the last snapshot began fired this many timers
	// (session.RecordFirings: what replaying them fires again, one turn's
	// fast-forward or catch-up included), a snapshot is started at the end
	// of that turn, MinInterval or not (one at a time); and a start-up that
	// replayed this many takes one before it serves. Which records count is
	// deterministic; when the snapshot is done is the disk's. Default
	// 10,000,000 (about 1 s of replay on the machine of docs/BENCHMARKS.md,
	// 8–14M firings a second).
	EveryFirings int64 `yaml:"every_firings"`
	// EveryReplay bounds a restart's replay by its time, where the
	// firings do not: the event loop measures how long it spent on the
	// turns whose records it logged (from a turn's start to its record's
	// commit, the writes to the sockets excepted: more than a replay of
	// them takes, which skips the I/O), and once the records since the
	// last snapshot began took this long a snapshot starts at the end of
	// that turn, MinInterval after the last one's start at the earliest
	// (one at a time; unlike EveryFirings, whose turn may hold a week's
	// fast-forward: a loop kept busy by steady load would otherwise write
	// snapshots back to back). A start-up counts its own replay's time
	// in, so after a long replay a snapshot starts as it serves, or
	// before it serves when the last start-up's such snapshot was never
	// committed (a crash loop: recoverymark.go). At 100M timers each add and firing costs several cache
	// misses, and a replay runs at 0.4–1M a second, not the 8–14M firings
	// of a small wheel (docs/BENCHMARKS.md, "Recovery after sustained
	// load"). Default 1s; negative means none. A restart after a crash
	// replays at most this, plus what the loop did while the last snapshot
	// was written (or in MinInterval, when longer), plus (when the crash
	// came while the next one was written) what it did meanwhile.
	EveryReplay time.Duration `yaml:"every_replay"`
	// MinInterval is the least time from the start of one snapshot to the
	// next (besides the one at a graceful stop): encoding competes with the
	// event loop for CPU, so a busy log must not make snapshots back to
	// back. Default 10s; negative means none. A reload that changes it
	// counts the new value from the last snapshot's start.
	MinInterval time.Duration `yaml:"min_interval"`
	// Nice is the nice value (1-19) of the thread that encodes and writes
	// a snapshot with Priority SnapshotNormal, and of the rest of one past
	// IdleMax, on Linux. Default 0: the server's own priority. A nice
	// value does not get the loop the CPU at its wake-up (the running
	// encoder keeps its slice; nice 10 changed nothing at 10M), and it has
	// a risk: a Go thread the kernel leaves waiting delays every
	// stop-the-world of the collector until it runs, so on a machine whose
	// CPUs are busy with other work a low-priority encoder can stall the
	// loop instead (docs/BENCHMARKS.md, "Flat at 100M").
	Nice int `yaml:"nice"`
	// Priority is how the kernel schedules the thread that encodes and
	// writes a snapshot, on Linux: SnapshotIdle (default) runs it at
	// SCHED_IDLE, so the event loop, waking for its tick or a request,
	// takes a CPU from it at once instead of waiting behind it for up to a
	// scheduler slice (the cause of the fire lateness a snapshot added:
	// docs/BENCHMARKS.md, "Fire lateness while a snapshot is written: the
	// cause"; at 100M on a quiet machine idle kept it within +0.5 ms and
	// normal did not: "Snapshot priority at 100M, measured"); SnapshotNormal
	// runs it like the loop, at Nice if set. Where other work keeps every
	// CPU busy an idle encoder gets almost none (IdleMax bounds that), and
	// the collector's stop-the-world waits for its thread to be given one.
	// Elsewhere both are the server's own priority.
	Priority string `yaml:"priority"`
	// IdleMax bounds how long an encoder runs at SCHED_IDLE: where other
	// work keeps the CPUs busy it gets almost none, so after IdleMax the
	// rest of that snapshot is written at normal priority (Nice if set),
	// which bounds the log's growth meanwhile as before. Default 30s
	// (three times a 100M snapshot's time on an idle machine); at least
	// 1s.
	IdleMax time.Duration `yaml:"idle_max"`
}

// The snapshot encoder's scheduling (Config.Snapshot.Priority).
const (
	SnapshotIdle   = "idle"
	SnapshotNormal = "normal"
)

// Timeouts bound how long a connection may hold server resources idle.
type Timeouts struct {
	// Handshake is how long a new connection may take to say hello.
	// Default 10s.
	Handshake time.Duration `yaml:"handshake"`
	// Idle is how long a session may send nothing (a ping counts) before it
	// is closed. Default 2m. Clients ping when idle (hello reports it).
	Idle time.Duration `yaml:"idle"`
	// Frame is how long a started request frame may take to arrive whole.
	// Default 10s.
	Frame time.Duration `yaml:"frame"`
}

// HTTPLimits bound the operator HTTP listener, so that idle or slow HTTP
// clients cannot hold the file descriptors game clients need. Zero means
// the default; a negative timeout turns it off. They apply at start (a
// reload does not change them).
type HTTPLimits struct {
	// MaxConnections is how many HTTP connections may be open at once; one
	// over it is answered 503 and closed at once. Taken out of the file
	// descriptors that limits.max_connections is computed from, unless
	// http_addr is off. Default 64.
	MaxConnections int `yaml:"max_connections"`
	// ReadTimeout bounds reading a request, headers and body. Default 10s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response, from the end of the request's
	// headers: a pprof profile or trace must be shorter. Default 2m.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before it is closed. Default 30s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxBadTokens is how many requests with a missing or wrong bearer
	// token one client address may make a minute, on a listener beyond
	// loopback (a burst of that many, then one every 60s/MaxBadTokens);
	// over it, the address is answered 429 without its token being
	// looked at. Default 60.
	MaxBadTokens int `yaml:"max_bad_tokens"`
	// TLS turns on TLS (HTTPS) on the operator listener, with the keys of
	// Config.TLS (the same files as the client port's, or others). Off by
	// default; cmd/tickwheel rereads the files on SIGHUP.
	TLS tlsconf.Files `yaml:"tls"`
}

// The operator HTTP listener's defaults (HTTPLimits).
const (
	DefaultHTTPMaxConnections = 64
	DefaultHTTPReadTimeout    = 10 * time.Second
	DefaultHTTPWriteTimeout   = 2 * time.Minute
	DefaultHTTPIdleTimeout    = 30 * time.Second
	DefaultHTTPMaxBadTokens   = 60
)

// WithDefaults returns h with every zero field set to its default and
// every negative timeout set to 0 (off).
func (h HTTPLimits) WithDefaults() HTTPLimits {
	if h.MaxConnections == 0 {
		h.MaxConnections = DefaultHTTPMaxConnections
	}
	if h.MaxBadTokens == 0 {
		h.MaxBadTokens = DefaultHTTPMaxBadTokens
	}
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{{&h.ReadTimeout, DefaultHTTPReadTimeout}, {&h.WriteTimeout, DefaultHTTPWriteTimeout}, {&h.IdleTimeout, DefaultHTTPIdleTimeout}} {
		switch {
		case *f.v == 0:
			*f.v = f.d
		case *f.v < 0:
			*f.v = 0
		}
	}
	return h
}

// httpFds is how many file descriptors the operator HTTP listener may hold:
// its listener, HTTP.MaxConnections connections and one being refused; 0
// when http_addr is off.
func (c *Config) httpFds() int {
	if c.HTTPAddr == "off" {
		return 0
	}
	return c.HTTP.MaxConnections + 2
}

// The log formats (Config.LogFormat).
const (
	LogText = "text"
	LogJSON = "json"
)

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
	if c.MaxListWalkPerTurn == 0 {
		c.MaxListWalkPerTurn = 1024
	}
	if err := c.persistenceDefaults(); err != nil {
		return c, err
	}
	if err := c.clusterDefaults(); err != nil {
		return c, err
	}
	if c.Limits.MaxRequestIDs == 0 && c.Cluster.ID == "" {
		// A single node remembers no request ids unless asked: its adds do
		// no request-id work and clients do not retry changes, as before
		// clusters (docs/OPERATIONS.md, "Retried changes"); a cluster's
		// failovers need them.
		c.Limits.MaxRequestIDs = -1
	}
	c.Limits = c.Limits.WithDefaults()
	// MaxConnections stays 0 here: Start derives it from the fd limit.
	t := &c.Timeouts
	defDur := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0 // off
		}
	}
	defDur(&t.Handshake, 10*time.Second)
	defDur(&t.Idle, 2*time.Minute)
	defDur(&t.Frame, 10*time.Second)
	switch {
	case c.Tick < time.Microsecond:
		return c, keyErr("tick", "%v is below 1µs", c.Tick)
	case c.MaxFiresPerTurn < 0:
		return c, keyErr("max_fires_per_turn", "%d: must be positive", c.MaxFiresPerTurn)
	case c.MaxListWalkPerTurn < 0:
		return c, keyErr("max_list_walk_per_turn", "%d: must be positive", c.MaxListWalkPerTurn)
	case c.LogLevel != "" && new(slog.Level).UnmarshalText([]byte(c.LogLevel)) != nil:
		return c, keyErr("log_level", "%q: want debug, info, warn or error", c.LogLevel)
	case c.LogFormat != "" && c.LogFormat != LogText && c.LogFormat != LogJSON:
		return c, keyErr("log_format", "%q: want text or json", c.LogFormat)
	case !(c.Speed >= wheel.MinSpeed && c.Speed <= wheel.MaxSpeed): // NaN too
		return c, keyErr("speed", "%v is out of range %v..%v", c.Speed, wheel.MinSpeed, wheel.MaxSpeed)
	}
	if c.HTTP.MaxConnections < 0 {
		return c, keyErr("http.max_connections", "%d: must not be negative", c.HTTP.MaxConnections)
	}
	if c.HTTP.MaxBadTokens < 0 {
		return c, keyErr("http.max_bad_tokens", "%d: must not be negative", c.HTTP.MaxBadTokens)
	}
	c.HTTP = c.HTTP.WithDefaults()
	if err := checkListenAddr("addr", c.Addr); err != nil {
		return c, err
	}
	if a := c.HTTPAddr; a != "" && a != "off" {
		if err := checkListenAddr("http_addr", a); err != nil {
			return c, keyErr("http_addr", "%s, or off", err.(*ConfigError).Msg)
		}
	}
	return c, checkLimits(&c.Limits)
}

// checkListenAddr returns a *ConfigError for key unless addr is a
// host:port a listener can use: the host empty (every interface), an IP
// address or a syntactically valid host name, and the port a number in
// 0..65535 (0: a free port) or a service name the system knows ("http").
// It does not resolve host names, so a name that does not resolve still
// fails at start.
func checkListenAddr(key, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return keyErr(key, "%q: want host:port: %v", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return keyErr(key, "%q: want host:port with a port in 0..65535: %v", addr, err)
	}
	if host != "" && !validHost(host) {
		return keyErr(key, "%q: want host:port: %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

// validHost reports whether host is an IP address (with an IPv6 zone or
// not) or a host name of letters, digits, '-' and '_' in dot-separated
// labels of 1..63 bytes, 253 bytes at most.
func validHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// checkLimits returns a *ConfigError naming the first limit out of its
// range, or nil.
func checkLimits(l *Limits) error {
	for _, f := range []struct {
		key string
		v   int
	}{{"max_frame", l.MaxFrame}, {"max_data", l.MaxData}, {"max_data_total", l.MaxDataTotal},
		{"max_timers_per_receiver", l.MaxTimersPerReceiver}, {"max_timers", l.MaxTimers},
		{"max_receivers_per_session", l.MaxReceiversPerSession}, {"max_backlog", l.MaxBacklog},
		{"max_backlog_bytes", l.MaxBacklogBytes}, {"max_backlog_total", l.MaxBacklogTotal},
		{"max_backlog_bytes_total", l.MaxBacklogBytesTotal}, {"max_outbox", l.MaxOutbox},
		{"max_outbox_bytes", l.MaxOutboxBytes}, {"max_outbox_total", l.MaxOutboxTotal},
		{"max_outbox_bytes_total", l.MaxOutboxBytesTotal}, {"max_connections", l.MaxConnections},
		{"max_name", l.MaxName}, {"max_list_page", l.MaxListPage}, {"max_receivers", l.MaxReceivers},
		{"ack_retention_ticks", l.AckRetentionTicks}, {"max_outbound_total", l.MaxOutboundTotal},
		{"max_bulk_per_turn", l.MaxBulkPerTurn}, {"max_request_ids", l.MaxRequestIDs}, {"request_id_ticks", l.RequestIDTicks}} {
		if f.v < 0 && (f.key != "max_request_ids" || f.v != -1) {
			return keyErr("limits."+f.key, "%d: limits must not be negative", f.v)
		}
	}
	if l.MaxRequestIDs > maxRequestIDs {
		return keyErr("limits.max_request_ids", "%d is above %d (-1 remembers none)", l.MaxRequestIDs, maxRequestIDs)
	}
	switch {
	case l.MaxFrame < 64 || l.MaxFrame > 64<<20:
		return keyErr("limits.max_frame", "%d is out of range 64..64MiB", l.MaxFrame)
	case l.MaxData > l.MaxFrame-64:
		return keyErr("limits.max_data", "%d must fit in a frame (max_frame - 64 = %d)", l.MaxData, l.MaxFrame-64)
	case l.MaxOutbound < 2*l.MaxFrame:
		return keyErr("limits.max_outbound", "%d must be at least twice max_frame (%d)", l.MaxOutbound, l.MaxFrame)
	case l.MaxInbound < 2*l.MaxFrame:
		return keyErr("limits.max_inbound", "%d must be at least twice max_frame (%d)", l.MaxInbound, l.MaxFrame)
	case l.MaxListBytes < l.MaxData+256 || l.MaxListBytes > l.MaxOutbound/2:
		return keyErr("limits.max_list_bytes", "%d must hold one timer (max_data + 256 = %d) and be at most max_outbound/2 (%d)",
			l.MaxListBytes, l.MaxData+256, l.MaxOutbound/2)
	}
	return nil
}

// sessionConfig is what the session core needs of c.
func (c *Config) sessionConfig() session.Config {
	return session.Config{AdminToken: c.AdminToken, ClientToken: c.ClientToken, AddOnlyBound: c.AddOnlyBound,
		TickNs: uint64(c.Tick.Nanoseconds()), MaxFiresPerTurn: c.MaxFiresPerTurn, MaxListWalkPerTurn: c.MaxListWalkPerTurn, ServerVersion: Version,
		Wire: c.wireLimits()}
}

// wireLimits are the limits as hello reports them.
func (c *Config) wireLimits() protocol.Limits {
	l, t := &c.Limits, &c.Timeouts
	w := protocol.Limits{
		MaxFrame: uint64(l.MaxFrame), MaxData: uint64(l.MaxData), MaxTimersPerReceiver: uint64(l.MaxTimersPerReceiver),
		MaxTimers: uint64(l.MaxTimers), MaxReceiversPerSession: uint64(l.MaxReceiversPerSession),
		MaxBacklog: uint64(l.MaxBacklog), MaxOutbound: uint64(l.MaxOutbound),
		MaxBacklogBytes: uint64(l.MaxBacklogBytes), MaxBacklogTotal: uint64(l.MaxBacklogTotal),
		MaxBacklogBytesTotal: uint64(l.MaxBacklogBytesTotal), MaxDataTotal: uint64(l.MaxDataTotal),
		MaxInbound: uint64(l.MaxInbound), MaxConnections: uint64(l.MaxConnections), MaxName: uint64(l.MaxName),
		MaxListPage: uint64(l.MaxListPage), MaxListBytes: uint64(l.MaxListBytes),
		HandshakeTimeoutMs: uint64(t.Handshake.Milliseconds()), IdleTimeoutMs: uint64(t.Idle.Milliseconds()),
		FrameTimeoutMs: uint64(t.Frame.Milliseconds()),
		MaxOutbox:      uint64(l.MaxOutbox), MaxOutboxBytes: uint64(l.MaxOutboxBytes),
		MaxOutboxTotal: uint64(l.MaxOutboxTotal), MaxOutboxBytesTotal: uint64(l.MaxOutboxBytesTotal),
		MaxRequestIDs: uint64(max(l.MaxRequestIDs, 0)), RequestIDTicks: uint64(l.RequestIDTicks),
	}
	if l.MaxRequestIDs < 0 { // remembers none: clients must not count on it (protocol.Limits)
		w.RequestIDTicks = 0
	}
	return w
}

// maxRequestIDs bounds limits.max_request_ids: 100M remembered changes
// take about 8 GiB (session.Limits.MaxRequestIDs).
const maxRequestIDs = 100_000_000
