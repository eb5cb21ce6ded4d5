package operator

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tickwheel/tickwheel/server"
)

// collector exports the attached server's counters: each scrape copies
// them once on the event loop (server.ReadMetrics) and turns the copy into
// constant metrics. The loop itself keeps plain integers and never sees
// Prometheus. docs/OPERATIONS.md documents every metric.
type collector struct{ o *Operator }

// scrapeTimeout bounds how long a scrape waits for the event loop.
const scrapeTimeout = 5 * time.Second

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("tickwheel_"+name, help, labels, nil)
}

var (
	dReady      = desc("ready", "1 when the server accepts clients (recovery done), else 0.")
	dTimers     = desc("timers", "Live timers.")
	dReceivers  = desc("receivers", "Receivers with live timers.")
	dRecords    = desc("receiver_records", "Receivers the server keeps a record of: bound, with queued events, or in acknowledged mode.")
	dRecordB    = desc("receiver_record_bytes", "Estimated memory of the receiver records, apart from their events (about 384 bytes a record on amd64).")
	dRetained   = desc("receivers_retained", "Of receiver_records, idle receivers in acknowledged mode kept for limits.ack_retention_ticks.")
	dReqIDs     = desc("request_ids", "Changes with a request id remembered for retries (limits.max_request_ids, limits.request_id_ticks).")
	dReqIDBytes = desc("request_id_bytes", "Estimated memory of the remembered changes (80 bytes each, up to about 240 allocated when clients have one each; a reply longer than 25 bytes adds its length).")
	dRetries    = desc("request_retries_total", "Retried changes answered with their first reply instead of being applied again, since start.")
	dSessions   = desc("sessions", "Connections that have said hello.")
	dConns      = desc("connections", "Open client connections.")
	dRequests   = desc("requests_total", "Requests decoded, by op.", "op")
	dErrors     = desc("errors_total", "Error replies sent, by code (refusals, malformed frames and timeouts included).", "code")
	dFires      = desc("fires_total", "Timer firings over the state's life (kept across restarts).")
	dLateness   = desc("fire_lateness_seconds", "Time from a firing's tick boundary to the end of the loop turn that wrote its event to the connection (or queued it).")
	dLag        = desc("lag_seconds", "How far the wheel trails the tw-time of its last advance (a catch-up or fast-forward in progress), in ticks times the tick.")
	dTwTime     = desc("tw_time_ticks", "tw-time now, in ticks (the clock's: the wheel reaches it at its next turn).")
	dTick       = desc("tick_seconds", "The duration of one tick.")
	dSpeed      = desc("speed", "tw-time's speed (1 = real time).")
	dFrozen     = desc("frozen", "1 when tw-time is frozen (moved only by fast-forward).")
	dBacklog    = desc("backlog_events", "Events queued in backlogs and outboxes (for unbound receivers, and held back for slow sessions).")
	dBacklogB   = desc("backlog_bytes", "Bytes of the queued events.")
	dOutbox     = desc("outbox_events", "Of backlog_events, those in outboxes (acknowledged mode).")
	dWaiting    = desc("waiting_firings", "Firings waiting for room in a full outbox.")
	dBacklogR   = desc("backlog_receivers", "Receivers with queued events.")
	dOldest     = desc("backlog_oldest_age_seconds", "tw-time since the oldest queued event was due (0 when none is queued).")
	dDropped    = desc("events_dropped_total", "Events dropped from full backlogs or lost with closed connections, over the state's life.")
	dLost       = desc("events_lost_total", "Of events_dropped_total, those lost with closed connections, over the state's life.")
	dSampled    = desc("load_sampled", "1 when backlog_receivers and backlog_oldest_age_seconds come from part of the receivers (more than 1,000 receiver records).")
	dStalled    = desc("stalled_sessions", "Sessions with events held back because their pending output is at max_outbound (slow consumers).")
	dSlowClose  = desc("slow_consumer_closes_total", "Connections closed for pipelining more than max_inbound while their replies waited unread.")
	dRefused    = desc("connections_refused_total", "Connections refused by max_connections or for want of a file descriptor.")
	dTLSFailed  = desc("tls_handshake_failures_total", "TLS connections closed at their handshake: an untrusted or missing client certificate, a client without TLS, a timeout.")
	dTurns      = desc("loop_turn_duration_seconds", "Duration of event-loop turns (reading requests, firing, writing).")
	dBytesIn    = desc("received_bytes_total", "Request bytes read from clients.")
	dBytesOut   = desc("sent_bytes_total", "Bytes handed to client connections (replies and events).")
	dPersist    = desc("persistence", "1 when the write-ahead log is on.")
	dLogBytes   = desc("log_bytes", "Size of the write-ahead log's segment files.")
	dMapped     = desc("wheel_mapped_bytes", "Memory the wheel maps outside the Go heap for its big arrays (nodes past the first 2M timers, index tables of 2^23 entries or more), counted in RSS once written, not in the Go runtime's heap figures.")
	dFsync      = desc("log_fsync_duration_seconds", "Duration of the log's fsyncs.")
	dReadOnly   = desc("log_read_only", "1 while changes to timers are refused (code unavailable) because the log cannot be written or fsynced.")
	dFsyncFail  = desc("log_fsync_failures_total", "Failed fsyncs of the log since start (each makes the server read-only until one succeeds).")
	dSnapAge    = desc("snapshot_age_seconds", "Time since the newest snapshot file was written (absent when there is none).")
	dSnapDur    = desc("snapshot_duration_seconds", "How long the last snapshot since start took to write (absent before the first).")
	dSnapshots  = desc("snapshots_total", "Snapshots written since start.")
	dRaftOn     = desc("raft_cluster", "1 when the server is a cluster node (cluster.id set); the tickwheel_raft_* metrics below are present only then.")
	dRaftLeader = desc("raft_leader", "1 while this node is the cluster's leader (it serves clients), else 0.")
	dRaftKnown  = desc("raft_leader_known", "1 while this node knows a leader, else 0 (an election is under way, or no quorum).")
	dRaftState  = desc("raft_state", "1 for this node's raft role.", "role")
	dRaftTerm   = desc("raft_term", "The raft term this node is in.")
	dRaftCommit = desc("raft_commit_index", "The raft log index this node knows committed.")
	dRaftApply  = desc("raft_applied_index", "The raft log index this node's state has applied.")
	dRaftLast   = desc("raft_last_index", "The last index in this node's raft log.")
	dRaftAuth   = desc("raft_auth_refused_total", "Raft connections refused at the cluster token handshake.")
	dRaftSuffr  = desc("raft_suffrage", "1 for this node's suffrage in the latest configuration: voter (votes, counts in the quorum) or nonvoter (gets the log only); both 0 while it is not a member.", "suffrage")
	dRaftMemb   = desc("raft_members", "Members of the latest raft configuration, by suffrage.", "suffrage")
	dRaftLCom   = desc("raft_leader_commit_index", "The commit index the leader last sent this node (the leader's own on the leader): a node whose applied index is within cluster.catch_up_entries of it has caught up.")
	dBuild      = desc("build_info", "Always 1; the labels say which build runs (tickwheel version).", "version", "revision", "goversion")
	dHTTPConns  = desc("http_connections", "Open connections to the operator HTTP listener (at most http.max_connections).")
	dHTTPRefuse = desc("http_connections_refused_total", "Connections to the operator HTTP listener answered 503 because http.max_connections were open.")
	dHTTPBadTok = desc("http_bad_tokens_total", "Requests to the operator HTTP listener refused for a missing or wrong bearer token, or while their address was throttled for too many.")
	dScrapeFail = desc("scrape_errors_total", "Scrapes that could not read the server's counters (the event loop did not answer in time).")
	allDescs    = []*prometheus.Desc{dReady, dTimers, dReceivers, dRecords, dRecordB, dRetained, dReqIDs, dReqIDBytes, dRetries, dSessions, dConns, dRequests, dErrors, dFires,
		dLateness, dLag, dTwTime, dTick, dSpeed, dFrozen, dBacklog, dBacklogB, dOutbox, dWaiting, dBacklogR, dOldest,
		dDropped, dLost, dSampled, dStalled, dSlowClose, dRefused, dTLSFailed, dTurns, dBytesIn, dBytesOut, dPersist, dLogBytes, dMapped, dFsync,
		dReadOnly, dFsyncFail, dSnapAge, dSnapDur, dSnapshots, dRaftOn, dRaftLeader, dRaftKnown, dRaftState, dRaftTerm, dRaftCommit, dRaftApply, dRaftLast, dRaftAuth,
		dRaftSuffr, dRaftMemb, dRaftLCom,
		dScrapeFail, dBuild, dHTTPConns, dHTTPRefuse, dHTTPBadTok}
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	b := server.Build()
	ch <- prometheus.MustNewConstMetric(dBuild, prometheus.GaugeValue, 1, b.Version, b.Revision, b.GoVersion)
	c.o.collectHTTP(ch)
	src := c.o.source()
	if src == nil {
		ch <- prometheus.MustNewConstMetric(dReady, prometheus.GaugeValue, 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	m, err := src.ReadMetrics(ctx, 0)
	if err != nil {
		c.o.scrapeErrors.Add(1)
		ch <- prometheus.MustNewConstMetric(dScrapeFail, prometheus.CounterValue, float64(c.o.scrapeErrors.Load()))
		ch <- prometheus.MustNewConstMetric(dReady, prometheus.GaugeValue, b2f(src.Ready()))
		return
	}
	collectMetrics(ch, &m)
	ch <- prometheus.MustNewConstMetric(dScrapeFail, prometheus.CounterValue, float64(c.o.scrapeErrors.Load()))
}

// collectMetrics turns one copy of the server's counters into metrics.
func collectMetrics(ch chan<- prometheus.Metric, m *server.Metrics) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	st, tick := &m.Stats, m.Tick.Seconds()
	gauge(dReady, b2f(m.Ready))
	gauge(dTimers, float64(st.Timers))
	gauge(dReceivers, float64(m.Load.TimerReceivers))
	gauge(dRecords, float64(st.Receivers))
	gauge(dRecordB, float64(m.Counters.ReceiverBytes))
	gauge(dMapped, float64(m.MappedBytes))
	gauge(dRetained, float64(m.Counters.RetainedReceivers))
	gauge(dReqIDs, float64(st.RequestIDs))
	gauge(dReqIDBytes, float64(st.RequestIDBytes))
	counter(dRetries, m.Counters.Retries)
	gauge(dSessions, float64(st.Sessions))
	gauge(dConns, float64(m.Connections))
	for op, n := range m.Requests {
		counter(dRequests, n, op)
	}
	for code, n := range m.Errors {
		counter(dErrors, n, code)
	}
	counter(dFires, st.FiredTotal)
	histogram(ch, dLateness, &m.Lateness)
	gauge(dLag, float64(st.Lag)*tick)
	gauge(dTwTime, float64(max(m.Clock, st.Now)))
	gauge(dTick, tick)
	gauge(dSpeed, st.Speed)
	gauge(dFrozen, b2f(st.Frozen))
	gauge(dBacklog, float64(st.BacklogEvents))
	gauge(dBacklogB, float64(m.Counters.BacklogBytes))
	gauge(dOutbox, float64(st.OutboxEvents))
	gauge(dWaiting, float64(st.WaitingFirings))
	gauge(dBacklogR, float64(m.Load.BacklogReceivers))
	gauge(dOldest, oldestAge(m))
	gauge(dSampled, b2f(m.Load.Sampled))
	counter(dDropped, m.Counters.Dropped)
	counter(dLost, m.Counters.Lost)
	gauge(dStalled, float64(m.Load.Stalled))
	counter(dSlowClose, m.SlowConsumerCloses)
	counter(dRefused, m.Refused)
	counter(dTLSFailed, m.TLSHandshakeFailures)
	histogram(ch, dTurns, &m.TurnDuration)
	counter(dBytesIn, m.BytesIn)
	counter(dBytesOut, m.BytesOut)
	collectCluster(ch, &m.Cluster)
	p := &m.Persist
	gauge(dPersist, b2f(p.On))
	if !p.On {
		return
	}
	gauge(dLogBytes, float64(p.LogBytes))
	histogram(ch, dFsync, &p.Fsync)
	gauge(dReadOnly, b2f(p.ReadOnly))
	counter(dFsyncFail, p.FsyncFailures)
	if p.HasSnapshot {
		gauge(dSnapAge, p.SnapshotAge.Seconds())
	}
	if p.Snapshots > 0 {
		gauge(dSnapDur, p.LastSnapshotDuration.Seconds())
	}
	counter(dSnapshots, p.Snapshots)
}

// collectHTTP sends the listener's own metrics (none before Serve).
func (o *Operator) collectHTTP(ch chan<- prometheus.Metric) {
	o.mu.Lock()
	ln := o.ln
	o.mu.Unlock()
	if ln == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(dHTTPConns, prometheus.GaugeValue, float64(ln.open.Load()))
	ch <- prometheus.MustNewConstMetric(dHTTPRefuse, prometheus.CounterValue, float64(ln.refused.Load()))
	ch <- prometheus.MustNewConstMetric(dHTTPBadTok, prometheus.CounterValue, float64(o.badTokens.Load()))
}

// oldestAge is the tw-time since the oldest queued event was due, in
// seconds.
func oldestAge(m *server.Metrics) float64 {
	now := max(m.Clock, m.Stats.Now)
	if !m.Load.Queued || m.Load.OldestDue >= now {
		return 0
	}
	return float64(now-m.Load.OldestDue) * m.Tick.Seconds()
}

// histogram sends h as a Prometheus histogram (cumulative buckets).
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h *server.Histogram) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// slogErrorLog passes the HTTP libraries' error lines to slog.
type slogErrorLog struct{ log *slog.Logger }

// Println logs promhttp's errors.
func (l slogErrorLog) Println(v ...any) { l.log.Error("operator: " + fmt.Sprint(v...)) }

// logger returns a log.Logger for net/http's errors.
func (l slogErrorLog) logger() *log.Logger { return slog.NewLogLogger(l.log.Handler(), slog.LevelWarn) }

// collectCluster sends a cluster node's raft metrics.
func collectCluster(ch chan<- prometheus.Metric, k *server.ClusterMetrics) {
	ch <- prometheus.MustNewConstMetric(dRaftOn, prometheus.GaugeValue, b2f(k.On))
	if !k.On {
		return
	}
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	g(dRaftLeader, b2f(k.Role == "leader"))
	g(dRaftKnown, b2f(k.Leader != ""))
	for _, role := range []string{"leader", "follower", "candidate", "shutdown"} {
		ch <- prometheus.MustNewConstMetric(dRaftState, prometheus.GaugeValue, b2f(k.Role == role), role)
	}
	g(dRaftTerm, float64(k.Term))
	g(dRaftCommit, float64(k.CommitIndex))
	g(dRaftApply, float64(k.AppliedIndex))
	g(dRaftLast, float64(k.LastIndex))
	ch <- prometheus.MustNewConstMetric(dRaftAuth, prometheus.CounterValue, float64(k.AuthRefused))
	for _, s := range []string{"voter", "nonvoter"} {
		ch <- prometheus.MustNewConstMetric(dRaftSuffr, prometheus.GaugeValue, b2f(k.Suffrage == s), s)
	}
	ch <- prometheus.MustNewConstMetric(dRaftMemb, prometheus.GaugeValue, float64(k.Voters), "voter")
	ch <- prometheus.MustNewConstMetric(dRaftMemb, prometheus.GaugeValue, float64(k.Nonvoters), "nonvoter")
	g(dRaftLCom, float64(k.LeaderCommit))
}
