package session

// State checks (cluster mode; docs/ARCHITECTURE.md, "State checks"). The
// replicated log makes every node's Core the same state at the same
// record, but a bug outside the Core (a record a node skipped or replayed
// twice) would make one silently different, and a node that leads later
// would serve that state. A check compares them: the leader marks a record
// with a check id, and each node hashes its Core's snapshot as it stands
// after that record — the leader when it marks it, a follower when it has
// replayed it. Equal states give equal snapshot bytes, so the nodes' hashes
// for one id must be equal.

// MarkCheck ends the record of the current turn with a check mark id: the
// state once every input recorded so far is applied is the one checked. It
// records first what the record holds back until it is needed (see
// quiet.go), so that the state a replay reaches at the mark is this one.
// The caller takes the record (TakeRecord) right after it, so that the
// mark is the record's last input, and snapshots the Core then. Nothing is
// recorded while recording is off.
func (c *Core) MarkCheck(id uint64) {
	if !c.rec.on {
		return
	}
	// What the record holds back first (the fields of quiet sessions, the
	// advance not recorded yet): the replay then reaches this state field
	// for field.
	c.settle()
	c.rec.buf = append(c.rec.buf, inCheck)
	c.rec.uv(id)
}

// TakeCheck reports whether the records replayed since the last call
// carried a check mark, and the id of the last one; it forgets it. The
// Core's state is the one to check when the mark ended the last record
// replayed (MarkCheck puts it last).
func (c *Core) TakeCheck() (id uint64, ok bool) {
	id, ok = c.check, c.checkMarked
	c.check, c.checkMarked = 0, false
	return id, ok
}
