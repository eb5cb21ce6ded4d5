package server

// noteDowntime tells the Core, at a restart with downtime: catch-up, the
// span of tw-time the server was down for: from where the recovered state
// stopped to the clock's tick now (see resumeTick). The Core records it,
// and timers whose firings fell in it follow their missed-firing policy
// (session.Core.Downtime). Not in the other downtime modes, nor while
// frozen: tw-time then resumes where it stopped and no firing is missed.
func (s *Server) noteDowntime() {
	if s.cfg.Downtime != DowntimeCatchUp || s.core.Frozen() {
		return
	}
	from, to := s.core.Now(), s.clock.Now()
	if to > from {
		s.core.Downtime(from, to)
		s.log.Info("downtime caught up after: missed-firing policies apply to the firings in it", "from", from, "to", to)
	}
}
