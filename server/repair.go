package server

import (
	"errors"
	"fmt"

	"github.com/tickwheel/tickwheel/server/journal"
)

// What start-up says about a damaged log, and the checkpoint that lets it
// notice a missing end (journal.Checkpoint).

// repairAdvice adds to journal.Open's refusal of a damaged log what the
// operator can do about it, in the words of the command line and the
// config file.
func repairAdvice(err error) error {
	var te *journal.TailError
	switch {
	case errors.As(err, &te):
		timers := fmt.Sprintf("%d timers", te.Tail.Note)
		if te.Tail.Note == 1 {
			timers = "1 timer"
		}
		return fmt.Errorf("%w; the server had %s at index %d. Start with -repair (repair: true in the config) to start from the log as it is: those records stay lost, and the TAIL file is moved into a repaired-* directory of the log directory",
			err, timers, te.Tail.Last)
	case errors.Is(err, journal.ErrCorrupt):
		return fmt.Errorf("%w. Start with -repair (repair: true in the config) to cut the log there: a copy of the cut segment and every later segment are moved into a repaired-* directory of the log directory, not deleted", err)
	}
	return err
}

// reportRepair logs what -repair gave up at start-up: the records cut or
// missing, where the cut files are kept, and the timers lost, as far as
// the last checkpoint tells (the number of timers it recorded, less the
// number recovered). Nothing if the repair changed nothing.
func (s *Server) reportRepair(r journal.RepairReport) {
	if r.Reason == "" {
		return
	}
	var timers uint64
	if s.core != nil {
		timers = uint64(s.core.Wheel().Len())
	}
	attrs := []any{"reason", r.Reason, "records_lost", r.Lost(), "first_lost", r.LostFrom, "last_lost", r.LostTo,
		"bytes_cut", r.LostBytes, "kept_in", r.Aside, "timers_recovered", timers}
	if r.TailOK {
		attrs = append(attrs, "timers_at_checkpoint", r.Tail.Note, "checkpoint_index", r.Tail.Last,
			"timers_lost", r.Tail.Note-min(r.Tail.Note, timers))
	} else {
		attrs = append(attrs, "timers_lost", "unknown (no checkpoint)")
	}
	s.log.Error("persistence: -repair: records were dropped from the log and are lost", attrs...)
}

// checkpoint records the log's durable index and the number of timers in
// the log's TAIL file (journal.Checkpoint): once a second, after the first
// record of a start, and at a graceful stop. Owned by the event loop.
func (s *Server) checkpoint() {
	p := s.persist
	err := p.j.Checkpoint(uint64(s.core.Wheel().Len()))
	switch {
	case err != nil && !p.tailFailing:
		s.log.Warn("persistence: cannot write the log's TAIL file: a deleted end of the log would go unnoticed at the next start", "err", err)
	case err == nil && p.tailFailing:
		s.log.Info("persistence: the log's TAIL file is written again")
	}
	p.tailFailing = err != nil
}
