package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// State checks in cluster mode (session/check.go; docs/ARCHITECTURE.md,
// "State checks"), as etcd compares its members' hashes: the leader marks
// a record of the replicated log, and every node hashes its Core's snapshot
// as it stands at the mark — the leader as it marks it, a follower once it
// has replayed it. Equal states give equal bytes, so the nodes' digests for
// one check must be equal; a node that differs has lost or doubled a
// committed record. Each node keeps its last results (StateChecks; the
// status page's state_check); `tickwheel cluster check` compares them.

const (
	// maxStateChecks is how many results a node keeps.
	maxStateChecks = 8
	// maxChecksHashing bounds the hashes running at once (each holds a
	// frozen copy of the state and a goroutine); a mark that comes while
	// that many run is skipped, and logged.
	maxChecksHashing = 2
)

// StateCheck is this node's hash of its state at a check mark.
type StateCheck struct {
	// ID is the mark's: the leader's clock when it marked it, in Unix ns
	// (above any id it marked before).
	ID uint64
	// Digest identifies the Core's state at the mark: the XXH64 of its
	// snapshot's bytes in digest mode (session.Core.DigestSnapshot: the
	// timers' records summed, not in the wheel's layout order) and of
	// that sum.
	Digest uint64
	Timers int // the timers in that state
}

// stateChecks is a node's state checks.
type stateChecks struct {
	mu   sync.Mutex
	done []StateCheck // guarded by mu: the last maxStateChecks, oldest first

	hashing int    // owned by the event loop: hashes running
	lastID  uint64 // owned by the event loop: the last id this node marked
}

func (c *stateChecks) add(sc StateCheck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.done) == maxStateChecks {
		c.done = append(c.done[:0], c.done[1:]...)
	}
	c.done = append(c.done, sc)
}

// StateChecks returns this node's latest state checks, oldest first (none
// on a single server). Safe from any goroutine.
func (s *Server) StateChecks() []StateCheck {
	s.checks.mu.Lock()
	defer s.checks.mu.Unlock()
	return append([]StateCheck(nil), s.checks.done...)
}

// lastCheck is the latest state check, zero when none.
func (s *Server) lastCheck() StateCheck {
	s.checks.mu.Lock()
	defer s.checks.mu.Unlock()
	if n := len(s.checks.done); n > 0 {
		return s.checks.done[n-1]
	}
	return StateCheck{}
}

// markCheck ends the current record with a check mark, proposes it, and
// starts hashing this node's state at the mark. It returns the check's id
// and the mark's proposal number (ok false when this node does not lead).
// Leader only, on the loop, between turns.
func (r *replica) markCheck() (id, seq uint64, ok bool) {
	if !r.leading || r.failed {
		return 0, 0, false
	}
	s := r.s
	id = max(uint64(time.Now().UnixNano()), s.checks.lastID+1)
	s.checks.lastID = id
	s.core.MarkCheck(id)
	s.commit()
	s.startCheck(id)
	return id, r.proposed, true
}

// errCheckNotCommitted: leadership changed before a check's mark was
// committed.
var errCheckNotCommitted = errors.New("leadership changed before the check's mark was committed: run it again")

// check marks the log for a state check and waits until the mark is
// committed (ctx bounds it). Not on the loop.
func (r *replica) check(ctx context.Context) (uint64, error) {
	var id, seq, gen uint64
	var ok bool
	if err := r.s.onLoop(ctx, func() { id, seq, ok = r.markCheck(); gen = r.gen }); err != nil {
		return 0, err
	}
	if !ok {
		return 0, errCheckNotCommitted
	}
	for {
		var done, lost bool
		if err := r.s.onLoop(ctx, func() {
			lost = r.gen != gen || r.failed
			done = !lost && r.reported >= seq
		}); err != nil {
			return 0, err
		}
		switch {
		case done:
			return id, nil
		case lost:
			return 0, errCheckNotCommitted
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the check's mark was not committed: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// startCheck hashes the Core's state as it stands now, for check id, on a
// goroutine of its own (the loop pauses only for the copy, as for a
// snapshot). On the loop.
func (s *Server) startCheck(id uint64) {
	if s.checks.hashing >= maxChecksHashing {
		s.log.Warn("cluster: state check skipped: two are being hashed already", "check", id)
		return
	}
	s.checks.hashing++
	records := new(uint64) // the timers' hashes summed, by the goroutine's AppendNext
	snap := s.core.DigestSnapshot(records)
	timers := snap.Timers()
	go func() {
		h := xxhash.New()
		buf := make([]byte, 0, snapshotPiece)
		snap.SetYield(runtime.Gosched)
		for done := false; !done; {
			buf, done = snap.AppendNext(buf[:0], snapshotPiece)
			_, _ = h.Write(buf)
			runtime.Gosched()
		}
		_, _ = h.Write(binary.LittleEndian.AppendUint64(nil, *records))
		sc := StateCheck{ID: id, Digest: h.Sum64(), Timers: timers}
		s.checks.add(sc)
		s.log.Info("cluster: state check", "check", id, "digest", fmt.Sprintf("%016x", sc.Digest), "timers", timers)
		ctx := context.Background()
		if s.replica != nil {
			ctx = s.replica.ctx
		}
		_ = s.onLoop(ctx, func() {
			s.checks.hashing--
			snap.Release()
		})
	}()
}
