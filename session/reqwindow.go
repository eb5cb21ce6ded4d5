package session

// Client windows: how the memory of request ids (requestid.go) finds most
// entries without hashing. A client numbers its changes from a counter
// (docs/PROTOCOL.md, "Retrying changes"), so the ids it has remembered
// lie in a narrow range: a pipelined client's last 100,000 changes span
// about 100,000 ids, whichever order its connections' batches arrive in.
// Each client with remembered entries has a window: an array indexed by
// id (modulo its power-of-two length) holding the ring slot + 1 of the
// entry of that id, for the ids lo to hi-1, a range no longer than the
// array, so no two of its ids share a place. A lookup is then the
// client's window (the last client looked up is kept, else a Go map from
// client id to window) and one read at the id's place; a new entry is one
// write there, and forgetting one a write of 0. Consecutive ids are
// side by side: the next change's place is in the line the previous
// change's was, and so is the oldest's, so a pipelined client's changes
// touch one cache line of the window in 16 and nothing else of the index
// (where the hash index, reqindex.go, touched a random line per new change
// and per forgotten one).
//
// An id that does not fit — one that would make the client's range longer
// than reqWindowSpan allows for its entries (ids far apart: a client that
// sends few changes among many other requests, or picks ids at random),
// or the largest uint64 — goes to the hash index instead; a lookup reads
// the hash index only when it holds any entry. Either way each live entry
// is in exactly one place (reqEntry.win says which), and a lookup finds it
// wherever it is. The windows' layout is not state, like the index's: the
// ring's order alone is observable (snapshots list the entries in it).

// reqWindowMin is a window's least length: 16 ids, one 64-byte line.
const reqWindowMin = 16

// reqWindowPerEntry bounds a window's range: at most this many ids per
// entry it holds (reqWindowSpan), so a window costs at most 4 bytes times
// this per entry, times 2 for the rounding to a power of two.
const reqWindowPerEntry = 8

// reqWindowScan bounds how far forgetting a window's lowest id moves lo
// past ids with no entry: lo is only a lower bound of the ids held, and a
// later forget goes on from there, so no forget costs more than this
// however sparse a client's ids.
const reqWindowScan = 32

// reqWindowSpan is the longest range of ids a window of n entries may
// cover.
func reqWindowSpan(n int) uint64 {
	return max(reqWindowMin, reqWindowPerEntry*uint64(n))
}

// reqClient is one client's window: ids lo to hi-1 (hi - lo <= len(win);
// every id held is in that range, lo may be below the least of them),
// the ring slot + 1 of id's entry at win[id & (len(win)-1)] (0: none),
// n entries in all. A client with no entry has no window: its slot is
// free (requestIDs.freeClient). Owned by the event loop.
type reqClient struct {
	client uint64
	lo, hi uint64
	win    []uint32 // its length is a power of two, at least reqWindowMin
	n      int
}

// place puts the entry of id at ring slot + 1 v in the window, growing it
// when the range allows (reqWindowSpan), and reports whether it did; id
// must not be in the window.
func (c *reqClient) place(id uint64, v uint32) bool {
	if id == ^uint64(0) { // hi would wrap
		return false
	}
	lo, hi := id, id+1
	if c.n > 0 {
		lo, hi = min(c.lo, id), max(c.hi, id+1)
	}
	if span := hi - lo; span > uint64(len(c.win)) {
		if span > reqWindowSpan(c.n+1) {
			return false
		}
		c.resize(span)
	}
	c.win[id&uint64(len(c.win)-1)] = v
	c.lo, c.hi = lo, hi
	c.n++
	return true
}

// resize moves the window's entries to a new array of at least span ids
// (a power of two, at least twice the old length).
func (c *reqClient) resize(span uint64) {
	size := max(2*len(c.win), reqWindowMin)
	for uint64(size) < span {
		size *= 2
	}
	win := make([]uint32, size)
	if c.n > 0 {
		om, nm := uint64(len(c.win)-1), uint64(size-1)
		for id := c.lo; id != c.hi; id++ {
			win[id&nm] = c.win[id&om]
		}
	}
	c.win = win
}

// remove forgets id's entry, which is in the window, then moves lo up
// past ids with no entry, at most reqWindowScan of them: entries go
// oldest first, which is not id order when a client's connections
// interleave, so the lowest id may have gone before (lo then stays below
// the ids held until a later remove moves it on). With none left, the
// range is empty.
func (c *reqClient) remove(id uint64) {
	win, m := c.win, uint64(len(c.win)-1)
	win[id&m] = 0
	if c.n--; c.n == 0 {
		c.lo, c.hi = 0, 0
		return
	}
	lo := c.lo
	for k := 0; k < reqWindowScan && win[lo&m] == 0; k++ {
		lo++
	}
	c.lo = lo
}

// oversized reports whether the window is far longer than its n entries
// may span (reqWindowSpan): more than reqWindowSlack times. A window
// grows only while its range fits its entries (place), to at most twice
// that; but its entries go oldest first while its length stays, so a
// client whose entries mostly went — a busy client gone quiet, or one
// that made its window long with many entries and keeps one alive among
// other clients' changes — would hold the window of its peak. Many such
// clients, each up to 64 bytes per entry of its own peak, held far more
// than max_request_ids entries' worth of windows (shrinkClient).
func (c *reqClient) oversized() bool {
	return len(c.win) > reqWindowMin && uint64(len(c.win)) > reqWindowSlack*reqWindowSpan(c.n)
}

// reqWindowSlack is how many times longer than its entries' span a
// window may be before it shrinks (oversized): a window that grew to L
// ids held at least L/16 entries, so at least L/32 forgets go between
// its growth and its shrinking, which pays for the shrink's O(L) scan.
const reqWindowSlack = 4

// find returns the ring slot + 1 of id's entry in the window, or 0.
func (c *reqClient) find(id uint64) uint32 {
	if id-c.lo >= c.hi-c.lo {
		return 0
	}
	return c.win[id&uint64(len(c.win)-1)]
}

// clientSlot returns the slot in clients of client's window: the last one
// looked up, else from the map; a new one when create (else false when
// client has none).
func (r *requestIDs) clientSlot(client uint64, create bool) (uint32, bool) {
	if r.lastSlot != 0 && r.lastClient == client {
		return r.lastSlot - 1, true
	}
	s, ok := r.byClient[client]
	if !ok {
		if !create {
			return 0, false
		}
		s = r.newClient(client)
	}
	r.lastClient, r.lastSlot = client, s+1
	return s, true
}

// newClient returns a free slot in clients for client's window, with an
// empty window of at least reqWindowMin ids.
func (r *requestIDs) newClient(client uint64) uint32 {
	var s uint32
	if n := len(r.free); n > 0 {
		s, r.free = r.free[n-1], r.free[:n-1]
	} else {
		s = uint32(len(r.clients))
		r.clients = append(r.clients, reqClient{})
	}
	c := &r.clients[s]
	c.client = client
	if c.win == nil {
		c.win = make([]uint32, reqWindowMin)
	}
	if r.byClient == nil {
		r.byClient = make(map[uint64]uint32)
	}
	r.byClient[client] = s
	return s
}

// freeClient frees slot s, whose window holds no entry (all zero); a
// window longer than the least is let go, the least kept for the next.
func (r *requestIDs) freeClient(s uint32) {
	c := &r.clients[s]
	delete(r.byClient, c.client)
	if len(c.win) > reqWindowMin {
		c.win = nil
	}
	c.client, c.lo, c.hi = 0, 0, 0
	r.free = append(r.free, s)
	if r.lastSlot == s+1 {
		r.lastSlot = 0
	}
}

// shrinkClient makes the window at slot s, oversized, fit its entries:
// a new array of the least power of two (at least reqWindowMin) that
// spans their ids when that range is within reqWindowSpan of them, else
// their entries go to the hash index and the window is freed (the
// client's next id makes a new one). O(the old length), once per at
// least a quarter of it forgotten (reqWindowSlack).
func (r *requestIDs) shrinkClient(s uint32) {
	c := &r.clients[s]
	m := uint64(len(c.win) - 1)
	lo, hi := c.hi, c.lo // the least id held and the largest + 1
	for id := c.lo; id != c.hi; id++ {
		if c.win[id&m] != 0 {
			lo, hi = min(lo, id), id+1
		}
	}
	if span := hi - lo; span <= reqWindowSpan(c.n) {
		size := reqWindowMin
		for uint64(size) < span {
			size *= 2
		}
		win := make([]uint32, size)
		for id := lo; id != hi; id++ {
			win[id&uint64(size-1)] = c.win[id&m]
		}
		c.win, c.lo, c.hi = win, lo, hi
		return
	}
	for id := lo; id != hi; id++ {
		if v := c.win[id&m]; v != 0 {
			r.ring[v-1].win = 0
			r.hashInsert(r.ring[v-1].key, v-1)
		}
	}
	c.n = 0
	c.win = nil
	r.freeClient(s)
}
