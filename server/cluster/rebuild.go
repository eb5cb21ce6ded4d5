package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// Committed rebuilds a state from what is committed, for a node that
// stopped leading and must drop the state it executed speculatively: it
// reads the latest raft snapshot into restore (restore(nil) when there is
// none: the state starts empty), then hands the committed record entries
// after it, in order, to apply, up to the last entry handed to
// Consumer.Apply (or the snapshot's index, if that is later). It returns
// that index: entries Consumer.Apply delivers afterwards with an index up
// to it — an Apply that was already called and waits for the consumer's
// loop — are already in the rebuilt state and must be dropped. Every entry
// Apply delivered before is in it too, even from a call that has not
// returned yet (the last batch of a leader's own entries, which its Apply
// skipped: TestCommittedRebuildAfterApply).
//
// Call it where Consumer.Apply and Restore deliver (the server's event
// loop): entries after upto come later through Apply. If raft
// compacts the log under it (a newer snapshot), it starts again from that
// snapshot, at most three times.
func (n *Node) Committed(restore func(io.Reader) error, apply func([]Entry) error) (upto uint64, err error) {
	for try := 0; try < 3; try++ {
		upto, err = n.committed(restore, apply)
		if !errors.Is(err, raft.ErrLogNotFound) {
			return upto, err
		}
	}
	return 0, fmt.Errorf("cluster: rebuilding from committed state: %w", err)
}

func (n *Node) committed(restore func(io.Reader) error, apply func([]Entry) error) (uint64, error) {
	n.fsm.mu.Lock()
	upto := n.fsm.handed
	n.fsm.mu.Unlock()
	metas, err := n.snaps.List()
	if err != nil {
		return 0, err
	}
	from := uint64(1)
	if len(metas) > 0 {
		meta, rc, err := n.snaps.Open(metas[0].ID)
		if err != nil {
			return 0, err
		}
		r := bufio.NewReaderSize(rc, 64<<10)
		_, err = readSnapHeader(r)
		if err == nil {
			err = restore(r)
		}
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("cluster: snapshot %s: %w", meta.ID, err)
		}
		from = meta.Index + 1
		upto = max(upto, meta.Index)
	} else if err := restore(nil); err != nil {
		return 0, err
	}
	const batch = 64
	entries := make([]Entry, 0, batch)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		err := apply(entries)
		entries = entries[:0]
		return err
	}
	for i := from; i <= upto; i++ {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			return 0, fmt.Errorf("cluster: log entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand || len(l.Data) == 0 || l.Data[0] != kindRecords {
			continue
		}
		stint, recs, err := decodeRecords(l.Data)
		if err != nil {
			return 0, fmt.Errorf("%w at index %d", err, i)
		}
		entries = append(entries, Entry{Index: l.Index, Term: l.Term, Stint: stint, Records: recs})
		if len(entries) == batch {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	return upto, flush()
}
