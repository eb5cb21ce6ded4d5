package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
)

// What a raft entry is. Each LogCommand entry's data starts with a kind
// byte:
//
//	kindRecords: uvarint stint, uvarint count, then count × (uvarint len, bytes):
//	             the records of one or more event-loop turns, in the order
//	             they were proposed, by the leader of that stint.
//	kindLeader:  uvarint stint, uvarint len, node id, uvarint len, client address:
//	             the first entry of a new leader, naming its client address.
//
// A stint is a random number a node draws each time it becomes leader; it
// tells a consumer whether an entry came from the leadership its state
// already holds (Entry.Stint).
const (
	kindRecords byte = 1
	kindLeader  byte = 2
)

// Entry is one committed raft entry holding turn records.
type Entry struct {
	Index uint64 // raft log index: increasing, not contiguous (raft's own entries are skipped)
	Term  uint64
	// Stint is the leadership stint that proposed it (Leadership.Stint).
	// A leader's consumer has executed the records of its own stint
	// already; every other entry must be replayed.
	Stint uint64
	// Records are the turns' records in order. They alias raft's buffers:
	// valid only until Apply returns.
	Records [][]byte
}

// Consumer is what the server implements to receive the replicated log.
// Apply, Snapshot and Restore are called on raft's FSM goroutine, one at a
// time, never concurrently with each other.
type Consumer interface {
	// Apply receives committed entries in log order, on every node (the
	// leader included). It must not return before it is done with the
	// records' bytes; it may block until the consumer's event loop took
	// them. An error is fatal to the consumer's state: it is logged and the
	// node stops applying (it must be restarted from a snapshot).
	Apply(entries []Entry) error
	// Snapshot captures the state as of the last entry applied. It should
	// only copy (it holds up Apply); the copy is written by Write on
	// another goroutine.
	Snapshot() (Snapshot, error)
	// Restore replaces the whole state with the snapshot read from r,
	// written by a Snapshot's Write (on this node or another).
	Restore(r io.Reader) error
}

// Snapshot is a consumer's captured state.
type Snapshot interface {
	// Write writes the state to w. Called once, on its own goroutine.
	Write(w io.Writer) error
	// Release is called when raft is done with the snapshot.
	Release()
}

// appendRecords encodes a kindRecords entry.
func appendRecords(b []byte, stint uint64, recs [][]byte) []byte {
	b = append(b, kindRecords)
	b = binary.AppendUvarint(b, stint)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return b
}

func appendLeader(b []byte, stint uint64, id, clientAddr string) []byte {
	b = append(b, kindLeader)
	b = binary.AppendUvarint(b, stint)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	b = binary.AppendUvarint(b, uint64(len(clientAddr)))
	return append(b, clientAddr...)
}

var errBadEntry = errors.New("cluster: malformed raft entry")

// field reads a uvarint length-prefixed field of b at *off.
func field(b []byte, off *int) ([]byte, error) {
	n, k := binary.Uvarint(b[*off:])
	if k <= 0 || n > uint64(len(b)-*off-k) {
		return nil, errBadEntry
	}
	*off += k
	f := b[*off : *off+int(n)]
	*off += int(n)
	return f, nil
}

func uvarint(b []byte, off *int) (uint64, error) {
	v, k := binary.Uvarint(b[*off:])
	if k <= 0 {
		return 0, errBadEntry
	}
	*off += k
	return v, nil
}

func decodeRecords(data []byte) (stint uint64, recs [][]byte, err error) {
	off := 1
	if stint, err = uvarint(data, &off); err != nil {
		return 0, nil, err
	}
	n, err := uvarint(data, &off)
	if err != nil || n > uint64(len(data)) {
		return 0, nil, errBadEntry
	}
	recs = make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		r, err := field(data, &off)
		if err != nil {
			return 0, nil, err
		}
		recs = append(recs, r)
	}
	if off != len(data) {
		return 0, nil, errBadEntry
	}
	return stint, recs, nil
}

func decodeLeader(data []byte) (stint uint64, id, addr string, err error) {
	off := 1
	if stint, err = uvarint(data, &off); err != nil {
		return
	}
	f, err := field(data, &off)
	if err != nil {
		return
	}
	g, err := field(data, &off)
	if err != nil {
		return
	}
	return stint, string(f), string(g), nil
}

// fsm is raft's BatchingFSM: it decodes entries and hands record entries
// to the consumer, and keeps the replicated map of leaders' client
// addresses (written into snapshots before the consumer's bytes).
type fsm struct {
	node     *Node
	consumer Consumer

	mu      sync.Mutex
	clients map[string]string // node id → client address; guarded by mu
	failed  error             // guarded by mu: the consumer's Apply error that stopped applying
	// handed is the index of the last log handed to the consumer: its
	// Apply has returned, is running, or is about to run; guarded by mu.
	// (Committed rebuilds up to it; the consumer drops what an Apply still
	// running delivers up to there.)
	handed uint64
}

func (f *fsm) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *fsm) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	entries := make([]Entry, 0, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		switch l.Data[0] {
		case kindRecords:
			stint, recs, err := decodeRecords(l.Data)
			if err != nil {
				resp[i] = fmt.Errorf("%w at index %d", err, l.Index)
				continue
			}
			entries = append(entries, Entry{Index: l.Index, Term: l.Term, Stint: stint, Records: recs})
		case kindLeader:
			_, id, addr, err := decodeLeader(l.Data)
			if err != nil {
				resp[i] = fmt.Errorf("%w at index %d", err, l.Index)
				continue
			}
			f.mu.Lock()
			f.clients[id] = addr
			f.mu.Unlock()
		default:
			resp[i] = fmt.Errorf("%w: kind %d at index %d", errBadEntry, l.Data[0], l.Index)
		}
	}
	f.mu.Lock()
	failed := f.failed
	if failed == nil && len(logs) > 0 {
		// Before the consumer's Apply, not after it returns: the consumer
		// may run a rebuild (Committed) between the end of its Apply and
		// the return here, and that rebuild must hold these entries, which
		// are never delivered again.
		f.handed = logs[len(logs)-1].Index
	}
	f.mu.Unlock()
	if len(entries) > 0 && failed == nil {
		if err := f.consumer.Apply(entries); err != nil {
			f.node.cfg.Log.Error("cluster: the consumer could not apply committed entries; this node stops applying",
				"first_index", entries[0].Index, "err", err)
			f.mu.Lock()
			f.failed = err
			f.mu.Unlock()
		}
	}
	return resp
}

// clientAddr is the client address node id published when it last became
// leader, or "".
func (f *fsm) clientAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clients[id]
}

const snapMagic = "TWCSNAP1"

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	failed := f.failed
	var head []byte
	head = append(head, snapMagic...)
	ids := make([]string, 0, len(f.clients))
	for id := range f.clients {
		ids = append(ids, id)
	}
	sort.Strings(ids) // equal states give equal snapshots
	head = binary.AppendUvarint(head, uint64(len(ids)))
	for _, id := range ids {
		head = binary.AppendUvarint(head, uint64(len(id)))
		head = append(head, id...)
		head = binary.AppendUvarint(head, uint64(len(f.clients[id])))
		head = append(head, f.clients[id]...)
	}
	f.mu.Unlock()
	if failed != nil {
		return nil, fmt.Errorf("cluster: no snapshot of a state that failed to apply: %w", failed)
	}
	s, err := f.consumer.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{head: head, s: s}, nil
}

type fsmSnapshot struct {
	head []byte
	s    Snapshot
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 64<<10)
	_, err := w.Write(s.head)
	if err == nil {
		err = s.s.Write(w)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.s.Release() }

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 64<<10)
	clients, err := readSnapHeader(r)
	if err != nil {
		return err
	}
	if err := f.consumer.Restore(r); err != nil {
		return err
	}
	f.mu.Lock()
	f.clients, f.failed = clients, nil
	f.mu.Unlock()
	return nil
}

// readSnapHeader reads the cluster's part of a snapshot, leaving r at the
// consumer's bytes.
func readSnapHeader(r *bufio.Reader) (map[string]string, error) {
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapMagic {
		return nil, fmt.Errorf("cluster: not a tickwheel cluster snapshot")
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > 1<<16 {
		return nil, fmt.Errorf("cluster: snapshot header: bad address count")
	}
	clients := make(map[string]string, n)
	for i := uint64(0); i < n; i++ {
		id, err1 := readField(r)
		addr, err2 := readField(r)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cluster: snapshot header: %w", err)
		}
		clients[id] = addr
	}
	return clients, nil
}

func readField(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > 1<<10 {
		return "", errBadEntry
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return string(b), err
}
