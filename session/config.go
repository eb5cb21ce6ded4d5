package session

import "github.com/tickwheel/tickwheel/protocol"

// Config is what the rules need to know of the server's configuration.
// Limits are part of the state (see Core.SetLimits): the write-ahead log
// records them, so that a replay judges every request by the limits it was
// judged by.
type Config struct {
	// AdminToken grants admin ops in hello; ClientToken, when set, is
	// required in hello (the admin token is accepted too). Tokens never
	// reach the log: hello is recorded with its outcome.
	AdminToken, ClientToken string
	// AddOnlyBound restricts add, cancel, pause, resume and cancel_all to
	// receivers the session has bound.
	AddOnlyBound bool
	// TickNs is the tick's duration, reported in hello and stats.
	TickNs uint64
	// MaxFiresPerTurn bounds the firings of the advance a fast-forward
	// runs at once (later turns go on with it); 0 means no bound.
	MaxFiresPerTurn int
	// MaxListWalkPerTurn bounds the work lists do in one loop turn (from
	// one Advance to the next), all sessions' together, to gather their
	// pages (listwalk.go; wheel.StepPage's units): a page that needs more
	// is gathered over the next turns. 0 means no bound.
	MaxListWalkPerTurn int
	// ServerVersion is reported in hello.
	ServerVersion string
	// Wire is the limits as hello reports them: Limits and the server's
	// own (connections, timeouts).
	Wire protocol.Limits
	// RestoreTimers, when not 0, is a trusted bound of the timers a
	// restore (RestoreFrom) will find, from a source the snapshot's
	// damage cannot reach (the server: its timers at the log's last
	// checkpoint, a file with a CRC of its own). The memory of that many
	// timers is backed at once on every core, the decoding waiting
	// (restoreWheelFrom, wheel.Prefaulter.Back), rather than at the
	// decoding's pace: freed memory is cheapest to take back right after
	// a crash. 0: at the decoding's pace only.
	RestoreTimers uint64
}

// Limits protect the server. Each zero field means its default (see
// WithDefaults). Limits on memory count bytes where bytes are what runs out.
type Limits struct {
	MaxFrame               int `yaml:"max_frame"`                 // bytes in one request frame, header excluded. Default 65536.
	MaxData                int `yaml:"max_data"`                  // bytes of data on one timer. Default 4096.
	MaxDataTotal           int `yaml:"max_data_total"`            // bytes of timer data in the whole server. Default 1 GiB.
	MaxTimersPerReceiver   int `yaml:"max_timers_per_receiver"`   // Default 100000.
	MaxTimers              int `yaml:"max_timers"`                // timers in the server. Default 10000000.
	MaxReceiversPerSession int `yaml:"max_receivers_per_session"` // bound at once. Default 100000.
	MaxBacklog             int `yaml:"max_backlog"`               // events queued per receiver; the oldest are dropped. Default 10000.
	MaxBacklogBytes        int `yaml:"max_backlog_bytes"`         // bytes of events queued per receiver; the oldest are dropped. Default 16 MiB.
	MaxBacklogTotal        int `yaml:"max_backlog_total"`         // events queued in all backlogs together; past it a receiver's own oldest is dropped, or the new one. Default 1000000.
	MaxBacklogBytesTotal   int `yaml:"max_backlog_bytes_total"`   // bytes of events queued in all backlogs together. Default 512 MiB.
	MaxOutbox              int `yaml:"max_outbox"`                // events not yet acknowledged per receiver in acknowledged mode; past it firings wait. Default 100000.
	MaxOutboxBytes         int `yaml:"max_outbox_bytes"`          // bytes of them per receiver. Default 16 MiB.
	MaxOutboxTotal         int `yaml:"max_outbox_total"`          // events in all outboxes together. Default 10000000.
	MaxOutboxBytesTotal    int `yaml:"max_outbox_bytes_total"`    // bytes in all outboxes together. Default 512 MiB.
	MaxOutbound            int `yaml:"max_outbound"`              // bytes of replies and events pending to one connection before the server stops adding to them. Default 8 MiB.
	MaxInbound             int `yaml:"max_inbound"`               // bytes of requests held unread for one connection (while its replies wait) before it is closed. Default 4 MiB.
	MaxConnections         int `yaml:"max_connections"`           // open client connections. Default: the fd limit less a reserve, at most 100000.
	MaxName                int `yaml:"max_name"`                  // bytes of a hello name or token. Default 256.
	MaxListPage            int `yaml:"max_list_page"`             // timers in one list reply. Default 1000.
	MaxListBytes           int `yaml:"max_list_bytes"`            // bytes of one list reply (at least one timer is sent). Default 1 MiB.
	// MaxReceivers bounds the receiver records in the server (about 384
	// bytes each, apart from their events): a bind that needs a new one
	// past it first forgets the longest-idle retained receiver in
	// acknowledged mode, and fails with limit_exceeded when there is none.
	// Default 1000000.
	MaxReceivers int `yaml:"max_receivers"`
	// AckRetentionTicks is how long, in ticks of tw-time, an idle receiver
	// in acknowledged mode (unbound, nothing pending, no timers) is kept
	// before it is forgotten. Default 360000 (an hour at a 10 ms tick).
	AckRetentionTicks int `yaml:"ack_retention_ticks"`
	// MaxOutboundTotal bounds the bytes of events (and dropped notices)
	// handed to all connections together and not yet known to have
	// reached the kernel: past it, events wait in their receivers'
	// backlogs as for a session at max_outbound, except that a session
	// with less than 64 KiB pending still takes them (so clients that
	// read keep being served while others do not read). Events of
	// receivers in acknowledged mode wait too, but their copies in the
	// output are not counted here (their outboxes are). Replies are
	// bounded per connection by max_outbound only. Default 512 MiB.
	MaxOutboundTotal int `yaml:"max_outbound_total"`
	// MaxBulkPerTurn bounds the timers a bulk operation (cancel_all,
	// pause_all, resume_all) covers in one loop turn: a larger one goes on
	// in the next turns, so that it never stalls the loop (bulk.go).
	// Default 1000: a cancel in a large group costs 0.3-1 µs, so a turn's
	// share stays well under a millisecond (TestBulkFigures: 1M timers
	// cancelled in 0.74 s at 1,000 a turn, 0.96 s at 5,000).
	MaxBulkPerTurn int `yaml:"max_bulk_per_turn"`
	// MaxRequestIDs bounds the changes with a request id (a client id)
	// the server remembers, so that a client's retry after a failover or a
	// lost connection gets the first reply instead of applying the change
	// twice (requestid.go): past it the oldest is forgotten. Each costs
	// about 80 bytes, up to twice that while the ring that holds them is
	// partly empty (stats request_id_bytes). -1 turns the memory off: no
	// change is remembered, hello reports max_request_ids and
	// request_id_ticks 0 so that clients send no ids and do not retry
	// changes themselves, and a change that is sent twice anyway applies
	// twice. Default 100000.
	MaxRequestIDs int `yaml:"max_request_ids"`
	// RequestIDTicks is how long, in ticks of tw-time, a remembered change
	// answers retries; an older one is forgotten. Default 30000 (5 minutes
	// at a 10 ms tick).
	RequestIDTicks int `yaml:"request_id_ticks"`
}

// WithDefaults returns l with every zero field set to its default, except
// MaxConnections, which the server derives from its file-descriptor limit.
func (l Limits) WithDefaults() Limits {
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
	def(&l.MaxOutboundTotal, 512<<20)
	def(&l.MaxDataTotal, 1<<30)
	def(&l.MaxBacklogBytes, 16<<20)
	def(&l.MaxBacklogBytesTotal, 512<<20)
	def(&l.MaxOutbox, 100_000) // past it firings wait, which takes more memory than the events would: not smaller than needed
	def(&l.MaxOutboxBytes, 16<<20)
	def(&l.MaxOutboxTotal, 10_000_000)
	def(&l.MaxOutboxBytesTotal, 512<<20)
	def(&l.MaxInbound, 4<<20)
	def(&l.MaxName, 256)
	def(&l.MaxListPage, 1000)
	def(&l.MaxReceivers, 1_000_000)
	def(&l.AckRetentionTicks, 360_000)
	def(&l.MaxBulkPerTurn, 1_000)
	def(&l.MaxRequestIDs, 100_000)
	def(&l.RequestIDTicks, 30_000)
	def(&l.MaxListBytes, max(min(1<<20, l.MaxOutbound/2), l.MaxData+256))
	return l
}
