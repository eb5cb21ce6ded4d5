package wheel

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Errors returned by Wheel methods. Each is a sentinel usable with errors.Is.
var (
	// ErrExists is returned by Add when the key is taken and Spec.Replace is false.
	ErrExists = errors.New("wheel: timer already exists")
	// ErrNotFound is returned when no timer has the given key.
	ErrNotFound = errors.New("wheel: timer not found")
	// ErrZeroAfter is returned by Add when neither After nor At is set.
	ErrZeroAfter = errors.New("wheel: after must be at least 1 tick")
	// ErrPast is returned by Add when At is not after Now.
	ErrPast = errors.New("wheel: at must be after now")
	// ErrOverflow is returned by Add when the first due tick would pass 2^64-1.
	ErrOverflow = errors.New("wheel: due tick overflows uint64")
	// ErrPaused is returned by Pause when the timer is already paused.
	ErrPaused = errors.New("wheel: timer already paused")
	// ErrNotPaused is returned by Resume when the timer is not paused.
	ErrNotPaused = errors.New("wheel: timer not paused")
	// ErrFull is returned by Add when the wheel holds the most timers it can (2^28 minus its slots).
	ErrFull = errors.New("wheel: too many timers")
)

// Default geometry: 10 levels of 100 slots span 100^10 = 10^20 ticks, more
// than any uint64 tick, so no timer ever waits in the overflow list.
const (
	DefaultLevels = 10
	DefaultSlots  = 100
	maxSlots      = 256
)

// Config sets the geometry of a Wheel. The zero value means 10 levels × 100 slots.
// Small geometries are for tests: timers beyond the top level's span wait in an
// overflow list and are placed again each time the top level turns over.
// Levels above the first whose span covers every uint64 tick are not created.
type Config struct {
	Levels int // number of levels, 1..16; 0 means DefaultLevels
	Slots  int // slots per level, 2..256; 0 means DefaultSlots
}

// Key identifies a timer: the receiver its events go to and the timer id chosen by the caller.
type Key struct {
	Receiver uint64
	Tid      uint64
}

// Spec describes a timer to add.
//
// The first firing is at At when At is non-zero, otherwise at Now()+After.
// After == 0 with At == 0 is ErrZeroAfter; At <= Now() is ErrPast; a due tick
// past 2^64-1 is ErrOverflow. Every is the interval between firings; 0 means
// After (or At-Now() for an At timer). Repeat is the number of firings, 0 = forever.
// Data is copied; the wheel keeps no reference to the caller's slice.
// With Replace, an existing timer of the same key is cancelled and replaced
// entirely (new schedule, new fired count, new place in the same-tick order).
type Spec struct {
	After   uint64
	At      uint64
	Every   uint64
	Repeat  uint32
	Data    []byte
	Replace bool
}

// Info describes a live timer, as returned by Get and List.
type Info struct {
	Key
	Due       uint64 // tick of the next firing; for a paused timer, Now()+Remaining, at most 2^64-1
	Remaining uint64 // ticks from Now() to Due; frozen while paused
	Every     uint64 // interval between firings
	Fired     uint64 // firings so far
	Repeat    uint32 // total firings, 0 = forever
	Paused    bool
	Data      []byte // a view into the wheel, valid until its next modifying call
}

// Fire is one firing, passed to the Advance callback.
type Fire struct {
	Key
	Tick   uint64 // the tick the timer was due at
	Fired  uint64 // 1-based count of this timer's firings, this one included
	Repeat uint32 // total firings, 0 = forever
	// Last is true when this firing removed the timer: its repeat count was
	// reached, or its next due tick would pass 2^64-1.
	Last bool
	Data []byte // valid only until the callback returns
}

// Wheel is a hierarchical timing wheel with the timer table above it: timers
// keyed by (receiver, tid), fired in order as tw-time advances.
//
// A Wheel is a plain value: no goroutines, locks, I/O or clock reads. It is not
// safe for concurrent use; one goroutine owns it. Its time moves only through
// Advance and never backwards.
type Wheel struct {
	levels int
	slots  int
	// gran[k] is the span of one slot at level k (slots^k). span[k] is the span
	// of the whole level k (slots^(k+1)); 0 stands for "more than 2^64".
	gran  []uint64
	span  []uint64
	recip []uint64 // recip[k] = (2^64-1) / gran[k], for digit
	// blockStart[k] is the first tick of the level-k block that holds now:
	// now - now%span[k] (0 when span[k] is 0).
	blockStart []uint64
	occupied   [][maxSlots / 64]uint64 // per-level occupancy bitmaps

	now     uint64
	nodes   slab
	index   index
	recv    recvTable
	extra   extras
	seq     uint32 // next add sequence number
	seqMax  uint32 // renumber live timers when seq reaches this (tests lower it); at most seqMask
	scratch []uint64
	pageBuf []tidRef  // ListPage's candidates
	page    pageIndex // ListPage's sorted tids of the receiver it pages (listpage.go)
	// listWork is the timers the last ListPage walked (ListWork).
	listWork int
	pageMin  uint32   // pageIndexMin (tests lower it)
	buildMax uint32   // pageBuildMax (tests lower it)
	walk     pageWalk // the page walk in progress (listwalk.go)

	// due is the sentinel of the list of timers due at now not yet fired, in
	// the same-tick order (fair.go): turn moves a level-0 slot there when
	// now reaches it and orders it.
	due  uint32
	fair fairState // fairOrder's scratch
	rot  rotState  // the rotation mode (fair.go), on while a backlog is merged
	// unsorted marks the level-0 slots whose list is not in add order (a
	// timer came down from a higher level, or was re-armed, behind a newer
	// one), so turn sorts only those.
	unsorted [maxSlots / 64]uint64
	ev       Fire // the firing passed to Advance's callback
	// firing is the node of the timer whose firing the callback is
	// handling, re-armed (0: none, or it was removed meanwhile): Reschedule
	// of its key, the usual move of a calendar timer, skips the index
	// look-up (a random access into a table far larger than the cache).
	firing   uint32
	dueBuf   []uint64 // turn's scratch for sorting a slot
	sortBuf  []uint64 // sortBySeq's scratch
	overflow uint32   // sentinel of the list of timers beyond the top level
	// overflowMin is at most the earliest due tick in the overflow list, so
	// the list is placed again only when that timer's top-level turn comes.
	// overflowStale says it may be below it (a timer due at overflowMin
	// left the list): nextEvent then recomputes it, so that NextEvent
	// depends only on the timers (a restored wheel computes it exactly).
	overflowMin   uint64
	overflowStale bool

	frz *freezeShared // shared with the Frozen copies (see Freeze); nil before the first
}

// normalize returns cfg with its defaults filled in and the levels that
// would stay empty dropped, or an error when it is out of range.
func (cfg Config) normalize() (Config, error) {
	if cfg.Levels == 0 {
		cfg.Levels = DefaultLevels
	}
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Levels < 1 || cfg.Levels > 16 {
		return cfg, fmt.Errorf("wheel: levels %d out of range 1..16", cfg.Levels)
	}
	if cfg.Slots < 2 || cfg.Slots > maxSlots {
		return cfg, fmt.Errorf("wheel: slots %d out of range 2..%d", cfg.Slots, maxSlots)
	}
	// Levels above the first one that spans every uint64 tick would stay empty.
	for k, g := 0, uint64(1); k < cfg.Levels; k++ {
		hi, lo := bits.Mul64(g, uint64(cfg.Slots))
		if hi != 0 {
			cfg.Levels = k + 1
			break
		}
		g = lo
	}
	return cfg, nil
}

// New returns an empty wheel whose time is start.
func New(start uint64, cfg Config) (*Wheel, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	w := &Wheel{
		levels:      cfg.Levels,
		slots:       cfg.Slots,
		gran:        make([]uint64, cfg.Levels),
		span:        make([]uint64, cfg.Levels),
		recip:       make([]uint64, cfg.Levels),
		blockStart:  make([]uint64, cfg.Levels),
		occupied:    make([][maxSlots / 64]uint64, cfg.Levels),
		seqMax:      seqMask,
		pageMin:     pageIndexMin,
		buildMax:    pageBuildMax,
		overflowMin: math.MaxUint64,
		now:         start,
	}
	g := uint64(1)
	for k := range cfg.Levels {
		w.gran[k] = g
		w.recip[k] = math.MaxUint64 / g
		if g != 0 {
			hi, lo := bits.Mul64(g, uint64(cfg.Slots))
			if hi != 0 {
				g = 0
			} else {
				g = lo
			}
		}
		w.span[k] = g
	}
	// Slab indices below nsent are list heads: one per slot, then overflow,
	// then the due list.
	nsent := uint32(cfg.Levels*cfg.Slots) + 2
	w.nodes.init(nsent)
	w.overflow, w.due = nsent-2, nsent-1
	w.index.init(&w.nodes)
	w.setNow(start, true)
	return w, nil
}

// Now returns the wheel's current tick: every timer due before it has fired.
// When an Advance stopped at its max with more timers due, Now is the tick
// they are due at, and they fire first on the next Advance.
func (w *Wheel) Now() uint64 { return w.now }

// DataBytes returns the bytes of data carried by the live timers (the sum
// of their Spec.Data lengths).
func (w *Wheel) DataBytes() uint64 { return w.extra.bytes }

// Len returns the number of live timers, paused ones included.
func (w *Wheel) Len() int { return int(w.index.count) }

// ReceiverLen returns the number of live timers of receiver r.
func (w *Wheel) ReceiverLen(r uint64) int {
	l, _ := w.recv.get(r)
	return int(l.count)
}
