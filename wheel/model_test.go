package wheel

// Model-based tests: the Wheel is driven by a stream of random operations and
// compared, after every operation and at every firing, against refModel, a
// plain slice of timers searched linearly. The operation stream is decoded
// from bytes, so TestModel (random bytes from fixed seeds) and FuzzOps (bytes
// from the fuzzer) share one driver, and any failure can be replayed as a
// fuzz input.
//
// Set WHEEL_SHRINK=1 to have a failing run shrunk to a short op list before it
// is reported.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------
// Reference model

// refTimer is one timer of the reference model.
type refTimer struct {
	key       Key
	due       uint64 // next firing; meaningful when !paused
	remaining uint64 // due-now frozen by Pause; meaningful when paused
	paused    bool
	every     uint64
	repeat    uint32
	fired     uint64
	seq       uint64
	data      []byte
	lvl       int // for coverage only: level the timer was last armed at
}

// refModel is the trivially correct reference: timers in a slice kept in
// add-sequence order, the next firing found by a linear scan. The timers
// due at or before now (the due set) fire in rotation by receiver
// (fair.go): ring holds the receivers with due timers, front first, queues
// each one's due timers in firing order. A tick's timers join in add order
// when the model reaches it (which for a due set empty until then gives
// its rounds), a timer resumed with no ticks left joins its receiver's
// queue at the end, a repeating one re-armed at or before now in due then
// add order.
type refModel struct {
	now    uint64
	seq    uint64
	timers []*refTimer // ascending seq
	ring   []uint64
	queues map[uint64][]*refTimer
}

// join puts t, due at or before now, into its receiver's queue: at the end
// (append), or after the timers due before it or on its tick and added
// before it. A receiver without a queue joins the ring at the back.
func (m *refModel) join(t *refTimer, append_ bool) {
	if m.queues == nil {
		m.queues = map[uint64][]*refTimer{}
	}
	r := t.key.Receiver
	q, ok := m.queues[r]
	if !ok {
		m.ring = append(m.ring, r)
	}
	j := len(q)
	if !append_ {
		for j > 0 && (q[j-1].due > t.due || q[j-1].due == t.due && q[j-1].seq > t.seq) {
			j--
		}
	}
	m.queues[r] = slices.Insert(q, j, t)
}

// pop takes the next firing off the ring: the front receiver's first, the
// receiver going to the back if it has more.
func (m *refModel) pop() *refTimer {
	r := m.ring[0]
	m.ring = m.ring[1:]
	q := m.queues[r]
	t := q[0]
	if len(q) > 1 {
		m.queues[r] = q[1:]
		m.ring = append(m.ring, r)
	} else {
		delete(m.queues, r)
	}
	return t
}

// dueAt returns the unpaused timers due at tick T in add order.
func (m *refModel) dueAt(T uint64) []*refTimer {
	var ts []*refTimer
	for _, t := range m.timers {
		if !t.paused && t.due == T {
			ts = append(ts, t)
		}
	}
	return ts
}

// settle makes the timers due at now join the due set, as the wheel does
// when it reaches a tick: called when an Advance stops at now with timers
// due and none were before.
func (m *refModel) settle() {
	if len(m.ring) == 0 {
		for _, t := range m.dueAt(m.now) {
			m.join(t, true)
		}
	}
}

// catchUp is a bounded Advance's start with timers still due: now moves
// on by a tick, up to target, and the timers due then join.
func (m *refModel) catchUp(target uint64) {
	if len(m.ring) == 0 || m.now >= target {
		return
	}
	m.now++
	for _, t := range m.dueAt(m.now) {
		m.join(t, true)
	}
}

// unlistDue takes t out of the due set (cancelled, replaced or paused).
func (m *refModel) unlistDue(t *refTimer) {
	r := t.key.Receiver
	q, ok := m.queues[r]
	if !ok {
		return
	}
	q = slices.DeleteFunc(q, func(u *refTimer) bool { return u == t })
	if len(q) > 0 {
		m.queues[r] = q
		return
	}
	delete(m.queues, r)
	m.ring = slices.DeleteFunc(m.ring, func(x uint64) bool { return x == r })
}

func (m *refModel) find(k Key) int {
	for i, t := range m.timers {
		if t.key == k {
			return i
		}
	}
	return -1
}

func (m *refModel) remove(i int) {
	m.unlistDue(m.timers[i])
	m.timers = slices.Delete(m.timers, i, i+1)
}

func (m *refModel) add(k Key, s Spec) error {
	var due, every uint64
	if s.At != 0 {
		if s.At <= m.now {
			return ErrPast
		}
		due, every = s.At, s.At-m.now
	} else {
		if s.After == 0 {
			return ErrZeroAfter
		}
		if s.After > math.MaxUint64-m.now {
			return ErrOverflow
		}
		due, every = m.now+s.After, s.After
	}
	if s.Every != 0 {
		every = s.Every
	}
	if i := m.find(k); i >= 0 {
		if !s.Replace {
			return ErrExists
		}
		m.remove(i)
	}
	m.seq++
	m.timers = append(m.timers, &refTimer{
		key: k, due: due, every: every, repeat: s.Repeat, seq: m.seq, data: bytes.Clone(s.Data),
	})
	return nil
}

func (m *refModel) cancel(k Key) error {
	i := m.find(k)
	if i < 0 {
		return ErrNotFound
	}
	m.remove(i)
	return nil
}

func (m *refModel) cancelAll(r uint64) int {
	n := len(m.timers)
	if _, ok := m.queues[r]; ok {
		delete(m.queues, r)
		m.ring = slices.DeleteFunc(m.ring, func(x uint64) bool { return x == r })
	}
	m.timers = slices.DeleteFunc(m.timers, func(t *refTimer) bool { return t.key.Receiver == r })
	return n - len(m.timers)
}

func (m *refModel) pause(k Key) error {
	i := m.find(k)
	if i < 0 {
		return ErrNotFound
	}
	t := m.timers[i]
	if t.paused {
		return ErrPaused
	}
	t.paused, t.remaining = true, t.due-min(t.due, m.now)
	m.unlistDue(t)
	return nil
}

// resume restarts a paused timer. Beyond the contract, which does not say
// what happens when now+Remaining passes 2^64-1 (paused with a large Remaining,
// then time moved on): the model follows the wheel's documented choice,
// ErrOverflow with the timer left paused.
func (m *refModel) resume(k Key) error {
	i := m.find(k)
	if i < 0 {
		return ErrNotFound
	}
	t := m.timers[i]
	if !t.paused {
		return ErrNotPaused
	}
	if t.remaining > math.MaxUint64-m.now {
		return ErrOverflow
	}
	t.paused, t.due = false, m.now+t.remaining
	if t.due == m.now { // due now: after its receiver's timers already waiting
		m.join(t, true)
	}
	return nil
}

func (m *refModel) info(t *refTimer) Info {
	in := Info{Key: t.key, Every: t.every, Fired: t.fired, Repeat: t.repeat, Paused: t.paused, Data: t.data}
	if t.paused {
		// Also beyond the contract: a Due past 2^64-1 saturates, as in the wheel.
		in.Due, in.Remaining = m.now+t.remaining, t.remaining
		if in.Due < m.now {
			in.Due = math.MaxUint64
		}
	} else {
		in.Due, in.Remaining = t.due, t.due-min(t.due, m.now)
	}
	return in
}

func (m *refModel) get(k Key) (Info, error) {
	i := m.find(k)
	if i < 0 {
		return Info{}, ErrNotFound
	}
	return m.info(m.timers[i]), nil
}

func (m *refModel) list(r uint64) []Info {
	var out []Info
	for _, t := range m.timers {
		if t.key.Receiver == r {
			out = append(out, m.info(t))
		}
	}
	return out
}

// next returns the timer that fires next among those due at or before
// target: the front of the ring, else the first added of the least due
// tick. nil if none. It changes nothing.
func (m *refModel) next(target uint64) *refTimer {
	if len(m.ring) > 0 {
		return m.queues[m.ring[0]][0]
	}
	var best *refTimer
	for _, t := range m.timers {
		if !t.paused && t.due <= target && (best == nil || t.due < best.due) {
			best = t
		}
	}
	return best
}

// fire fires t (which must be the one next returned): with nothing due,
// now moves to its due tick and that tick's timers join; the timer is
// removed or re-armed before the Fire is handed out.
func (m *refModel) fire(t *refTimer) Fire {
	if len(m.ring) == 0 {
		if t.due < m.now {
			panic(fmt.Sprintf("model: firing %v due %d before now %d", t.key, t.due, m.now))
		}
		m.now = t.due
		m.settle()
	}
	if got := m.pop(); got != t {
		panic(fmt.Sprintf("model: firing %v, not the front of the rotation (%v)", t.key, got.key))
	}
	T := t.due
	t.fired++
	last := (t.repeat != 0 && t.fired == uint64(t.repeat)) || T > math.MaxUint64-t.every
	f := Fire{Key: t.key, Tick: T, Fired: t.fired, Repeat: t.repeat, Last: last, Data: t.data}
	if last {
		m.remove(m.find(t.key))
	} else {
		t.due = T + t.every
		if t.due <= m.now { // re-armed into the backlog
			m.join(t, false)
		}
	}
	return f
}

// firingsUpTo bounds the number of firings an Advance to target would make
// with no callback activity, paused timers counted as if resumed now. It stops
// counting past limit.
func (m *refModel) firingsUpTo(target, limit uint64) uint64 {
	var n uint64
	for _, t := range m.timers {
		due := t.due
		if t.paused {
			due = m.now + t.remaining
			if due < m.now {
				due = math.MaxUint64
			}
		}
		if due > target {
			continue
		}
		k := (target-due)/t.every + 1
		if t.repeat != 0 {
			k = min(k, uint64(t.repeat)-t.fired)
		}
		n += k
		if n > limit || n < k {
			return limit + 1
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// Operation source

// opSource hands out choices decoded from bytes. When the bytes run out it
// yields zeros and exhausted turns true.
type opSource struct {
	data []byte
	pos  int
}

func (s *opSource) byte() byte {
	if s.pos >= len(s.data) {
		s.pos++
		return 0
	}
	b := s.data[s.pos]
	s.pos++
	return b
}

func (s *opSource) exhausted() bool { return s.pos >= len(s.data) }

// intn returns a value in [0, n), n <= 65536.
func (s *opSource) intn(n int) int {
	switch {
	case n <= 1:
		return 0
	case n <= 256:
		return int(s.byte()) % n
	default:
		return (int(s.byte()) | int(s.byte())<<8) % n
	}
}

func (s *opSource) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(s.byte())
	}
	return v
}

// ---------------------------------------------------------------------------
// Runs

// modelParams fixes one run: geometry, start tick, key space, and optionally a
// lowered threshold for renumbering the add sequence.
type modelParams struct {
	cfg    Config
	start  uint64
	nRecv  int
	nTid   int
	seqMax uint32 // 0 leaves the wheel's default
	// pageMin, when not 0, lowers the receiver size from which ListPage
	// keeps sorted tids, so that small receivers take that path too.
	pageMin uint32
}

func (p modelParams) String() string {
	s := fmt.Sprintf("Config{Levels:%d,Slots:%d} start=%d keys=%dx%d", p.cfg.Levels, p.cfg.Slots, p.start, p.nRecv, p.nTid)
	if p.seqMax != 0 {
		s += fmt.Sprintf(" seqMax=%d", p.seqMax)
	}
	if p.pageMin != 0 {
		s += fmt.Sprintf(" pageMin=%d", p.pageMin)
	}
	return s
}

// modelGeometries are the geometries the tests run; a fuzz input picks one by index.
var modelGeometries = []Config{
	{},                      // 10 x 100, the default: spans more than 2^64
	{Levels: 2, Slots: 4},   // spans 16 ticks: most timers overflow
	{Levels: 3, Slots: 2},   // spans 8
	{Levels: 4, Slots: 10},  // spans 10^4
	{Levels: 1, Slots: 2},   // a single level of two slots
	{Levels: 3, Slots: 3},   // non power of two
	{Levels: 16, Slots: 2},  // many levels: long cascades
	{Levels: 8, Slots: 256}, // spans exactly 2^64
	{Levels: 2, Slots: 65},  // occupancy bitmap spills into a second word
	{Levels: 5, Slots: 7},
}

// Key spaces: few keys so that duplicates, replaces and cancels of live timers are common.
// The last, with bursts of adds, puts hundreds of timers on one tick.
var modelKeySpaces = [][2]int{{3, 8}, {3, 8}, {2, 3}, {4, 40}, {2, 300}}

var modelReceivers = []uint64{1, 0, math.MaxUint64, 1 << 32}

// tidValue spreads tid number i over the uint64 range (0, small, huge).
func tidValue(i int) uint64 {
	switch i {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	case 2:
		return 1 << 63
	default:
		return uint64(i) * 0x9E3779B97F4A7C15 >> (uint(i) % 48)
	}
}

const (
	modelHeaderLen = 12
	modelMaxBody   = 1 << 20
)

// decodeHeader takes the run parameters from the first bytes of a fuzz input:
// geometry, start kind, 8 bytes of start, key space, seqMax.
func decodeHeader(data []byte) (modelParams, []byte) {
	var h [modelHeaderLen]byte
	n := copy(h[:], data)
	body := data[n:]
	var p modelParams
	p.cfg = modelGeometries[int(h[0])%len(modelGeometries)]
	levels, slots := geometryOf(p.cfg)
	raw := uint64(0)
	for _, b := range h[2:10] {
		raw = raw<<8 | uint64(b)
	}
	switch h[1] % 6 {
	case 0:
		p.start = 0
	case 1, 2:
		p.start = raw
	case 3:
		p.start = math.MaxUint64 - raw%4096
	case 4: // just before the top level (or a level) turns over
		pw := slotPowers(levels, slots)
		k := 1 + int(raw>>32)%levels
		if pw[k] == 0 {
			p.start = math.MaxUint64 - raw%16
		} else {
			p.start = pw[k]*(1+raw%3) - 1 - raw%4
		}
	case 5:
		p.start = 1<<63 - raw%1024
	}
	ks := modelKeySpaces[int(h[10])%len(modelKeySpaces)]
	p.nRecv, p.nTid = ks[0], ks[1]
	if h[11]%4 == 0 {
		p.seqMax = uint32(4*p.nRecv*p.nTid) + uint32(h[11])
	}
	if h[11]>>2&1 == 0 {
		p.pageMin = 1
	}
	return p, body
}

// encodeHeader is the inverse of decodeHeader for the start kinds used by
// TestModel: an explicit start (kind 1).
func encodeHeader(geom int, start uint64, keySpace int, lowSeq bool) []byte {
	h := make([]byte, modelHeaderLen)
	h[0] = byte(geom)
	h[1] = 1
	for i := range 8 {
		h[2+i] = byte(start >> (56 - 8*i))
	}
	h[10] = byte(keySpace)
	h[11] = 1
	if lowSeq {
		h[11] = 4 * 7
	}
	return h
}

func geometryOf(cfg Config) (levels, slots int) {
	levels, slots = cfg.Levels, cfg.Slots
	if levels == 0 {
		levels = DefaultLevels
	}
	if slots == 0 {
		slots = DefaultSlots
	}
	return
}

// powers returns slots^k for k = 0..levels+1, 0 standing for 2^64 or more.
func slotPowers(levels, slots int) []uint64 {
	pw := make([]uint64, levels+2)
	g := uint64(1)
	for k := range pw {
		pw[k] = g
		if g != 0 {
			hi, lo := bits.Mul64(g, uint64(slots))
			if hi != 0 {
				g = 0
			} else {
				g = lo
			}
		}
	}
	return pw
}

// modelCoverage counts what the runs exercised, so TestModel can check that it
// reached every level, the overflow list and the 2^64 edge.
type modelCoverage struct {
	armed        []int // timers armed (added, re-armed, resumed) per level; [levels] = overflow list
	fired        []int // firings per level the timer was armed at
	fires        int
	lastOverflow int // Last because the next due tick would pass 2^64-1
	fireAtMax    int // firings at tick 2^64-1
	maxStops     int // Advances stopped by max
	maxStopDone  int // ... that still finished: nothing was left, and Now() moved to `to`
	catchUps     int // Advances that began with timers due (a backlog)
	lateFires    int // firings due before Now() (the wheel ran ahead of a backlog)
	pauseAtZero  int // pauses with Remaining 0
	callbackOps  int
	ops          int // operations run
	ends         int // runs that reached tick 2^64-1
	errs         map[string]int
}

func newModelCoverage(levels int) *modelCoverage {
	return &modelCoverage{armed: make([]int, levels+1), fired: make([]int, levels+1), errs: map[string]int{}}
}

type modelMismatch string

type modelRunner struct {
	p      modelParams
	levels int
	slots  int
	pw     []uint64
	w      *Wheel
	m      *refModel
	src    *opSource // nil: no random callback actions
	recvs  []uint64
	tids   []uint64
	cov    *modelCoverage

	tracing bool
	trace   []string
	op      int // index of the current op
	opStart []int

	checks  int
	record  bool
	fires   []Fire
	dataCtr int

	// During an Advance.
	target    uint64
	maxFires  int
	calls     int
	unlimited bool
	cbAdds    int
	listBuf   []Info
}

// modelFireLimit bounds the firings of one Advance: with no max the driver shrinks
// `to` (or sets a max) so that the model expects at most this many.
const (
	modelFireLimit = 2000
	cbAddLimit     = 64   // callback Adds per unlimited Advance
	cbAddRepeats   = 4    // most firings of a timer added by a callback during an unlimited Advance
	turnBudget     = 1024 // top-level turns per Advance on geometries with an overflow list
)

func newModelRunner(p modelParams, src *opSource, cov *modelCoverage) *modelRunner {
	levels, slots := geometryOf(p.cfg)
	w, err := New(p.start, p.cfg)
	if err != nil {
		panic(modelMismatch(fmt.Sprintf("New(%d, %+v): %v", p.start, p.cfg, err)))
	}
	if p.seqMax != 0 {
		w.seqMax = p.seqMax
	}
	if p.pageMin != 0 {
		w.pageMin = p.pageMin
	}
	if cov == nil {
		cov = newModelCoverage(levels)
	}
	r := &modelRunner{
		p: p, levels: levels, slots: slots, pw: slotPowers(levels, slots),
		w: w, m: &refModel{now: p.start}, src: src, cov: cov,
	}
	for i := range p.nRecv {
		r.recvs = append(r.recvs, modelReceivers[i%len(modelReceivers)])
	}
	for i := range p.nTid {
		r.tids = append(r.tids, tidValue(i))
	}
	return r
}

func (r *modelRunner) failf(format string, args ...any) {
	panic(modelMismatch(fmt.Sprintf(format, args...)))
}

func (r *modelRunner) tracef(format string, args ...any) {
	if r.tracing {
		r.trace = append(r.trace, fmt.Sprintf(format, args...))
	}
}

// levelOf is the level a timer due at due lands in when armed at now: the
// lowest k whose level-k block (slots^(k+1) ticks) holds both; levels = overflow list.
func (r *modelRunner) levelOf(now, due uint64) int {
	for k := range r.levels {
		sp := r.pw[k+1]
		if sp == 0 || due/sp == now/sp {
			return k
		}
	}
	return r.levels
}

func (r *modelRunner) noteArm(k Key) {
	t := r.m.timers[r.m.find(k)]
	t.lvl = r.levelOf(r.m.now, t.due)
	r.cov.armed[t.lvl]++
}

func sentinelName(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ErrExists):
		return "ErrExists"
	case errors.Is(err, ErrNotFound):
		return "ErrNotFound"
	case errors.Is(err, ErrZeroAfter):
		return "ErrZeroAfter"
	case errors.Is(err, ErrPast):
		return "ErrPast"
	case errors.Is(err, ErrOverflow):
		return "ErrOverflow"
	case errors.Is(err, ErrPaused):
		return "ErrPaused"
	case errors.Is(err, ErrNotPaused):
		return "ErrNotPaused"
	case errors.Is(err, ErrFull):
		return "ErrFull"
	}
	return fmt.Sprintf("%q", err.Error())
}

func (r *modelRunner) sameErr(what string, got, want error) {
	if want == nil && got == nil || want != nil && errors.Is(got, want) {
		r.cov.errs[what+":"+sentinelName(want)]++
		return
	}
	r.failf("%s: wheel returned %s, model %s", what, sentinelName(got), sentinelName(want))
}

func fmtData(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) <= 8 {
		return fmt.Sprintf("%x", b)
	}
	return fmt.Sprintf("%x…(%dB)", b[:8], len(b))
}

func specString(s Spec) string {
	var b strings.Builder
	if s.At != 0 {
		fmt.Fprintf(&b, "At:%d ", s.At)
	}
	if s.After != 0 || s.At == 0 {
		fmt.Fprintf(&b, "After:%d ", s.After)
	}
	if s.Every != 0 {
		fmt.Fprintf(&b, "Every:%d ", s.Every)
	}
	if s.Repeat != 0 {
		fmt.Fprintf(&b, "Repeat:%d ", s.Repeat)
	}
	if s.Data != nil {
		fmt.Fprintf(&b, "Data:%dB ", len(s.Data))
	}
	if s.Replace {
		b.WriteString("Replace ")
	}
	return "Spec{" + strings.TrimSpace(b.String()) + "}"
}

func fireString(f Fire) string {
	return fmt.Sprintf("{%d %d} tick=%d fired=%d repeat=%d last=%v data=%s",
		f.Receiver, f.Tid, f.Tick, f.Fired, f.Repeat, f.Last, fmtData(f.Data))
}

func infoString(in Info) string {
	return fmt.Sprintf("{%d %d} due=%d rem=%d every=%d fired=%d repeat=%d paused=%v data=%s",
		in.Receiver, in.Tid, in.Due, in.Remaining, in.Every, in.Fired, in.Repeat, in.Paused, fmtData(in.Data))
}

// ---------------------------------------------------------------------------
// Operations applied to both sides

func (r *modelRunner) doAdd(k Key, s Spec, ind string) error {
	merr := r.m.add(k, s)
	werr := r.w.Add(k, s)
	for i := range s.Data { // the wheel must have copied Data
		s.Data[i] ^= 0x5a
	}
	r.tracef("%sAdd({%d %d}, %s) -> %s", ind, k.Receiver, k.Tid, specString(s), sentinelName(merr))
	r.sameErr("Add", werr, merr)
	if merr == nil {
		r.noteArm(k)
	}
	return merr
}

func (r *modelRunner) doCancel(k Key, ind string) {
	merr := r.m.cancel(k)
	werr := r.w.Cancel(k)
	r.tracef("%sCancel({%d %d}) -> %s", ind, k.Receiver, k.Tid, sentinelName(merr))
	r.sameErr("Cancel", werr, merr)
}

func (r *modelRunner) doCancelAll(recv uint64, ind string) {
	want := r.m.cancelAll(recv)
	got := r.w.CancelAll(recv)
	r.tracef("%sCancelAll(%d) -> %d", ind, recv, want)
	if got != want {
		r.failf("CancelAll(%d): wheel cancelled %d, model %d", recv, got, want)
	}
}

func (r *modelRunner) doPause(k Key, ind string) {
	merr := r.m.pause(k)
	werr := r.w.Pause(k)
	r.tracef("%sPause({%d %d}) -> %s", ind, k.Receiver, k.Tid, sentinelName(merr))
	r.sameErr("Pause", werr, merr)
	if merr == nil && r.m.timers[r.m.find(k)].remaining == 0 {
		r.cov.pauseAtZero++
	}
}

func (r *modelRunner) doResume(k Key, ind string) {
	merr := r.m.resume(k)
	werr := r.w.Resume(k)
	r.tracef("%sResume({%d %d}) -> %s", ind, k.Receiver, k.Tid, sentinelName(merr))
	r.sameErr("Resume", werr, merr)
	if merr == nil {
		r.noteArm(k)
	}
}

// doAdvance runs Advance(to, max) on the wheel, checking every firing against
// the model, then the count, done and Now.
func (r *modelRunner) doAdvance(to uint64, max int) {
	old := r.m.now
	r.target = to
	if to < old {
		r.target = old
	}
	r.maxFires, r.calls, r.cbAdds = max, 0, 0
	r.unlimited = max <= 0
	r.tracef("Advance(to=%d, max=%d) from now=%d", to, max, old)
	if max > 0 && len(r.m.ring) > 0 {
		r.cov.catchUps++
		r.m.catchUp(r.target)
	}
	fired, done := r.w.Advance(to, max, r.onFire)
	if fired != r.calls {
		r.failf("Advance returned fired=%d but called fn %d times", fired, r.calls)
	}
	if max > 0 && r.calls == max {
		// Stopped after max firings: Now() is the due tick of the next
		// firing at or before `to`, or `to` (done) when there is none.
		r.cov.maxStops++
		if len(r.m.ring) > 0 {
			// Stopped with timers due: Now() stays.
		} else if t := r.m.next(r.target); t != nil {
			r.m.now = t.due
			r.m.settle()
		} else {
			r.cov.maxStopDone++
			r.m.now = r.target
		}
	} else {
		if t := r.m.next(r.target); t != nil {
			r.failf("Advance(to=%d, max=%d) returned after %d firings, but {%d %d} due at %d (seq %d) did not fire",
				to, max, fired, t.key.Receiver, t.key.Tid, t.due, t.seq)
		}
		r.m.now = r.target
	}
	wantDone := r.m.now == r.target && r.m.next(r.target) == nil
	r.tracef("  -> fired=%d done=%v now=%d", fired, wantDone, r.m.now)
	if got := r.w.Now(); got != r.m.now {
		r.failf("after Advance(to=%d, max=%d) from %d: Now()=%d, model %d (fired %d)", to, max, old, got, r.m.now, fired)
	}
	if done != wantDone {
		r.failf("Advance(to=%d, max=%d) from %d: done=%v, model %v (fired %d, now %d)", to, max, old, done, wantDone, fired, r.m.now)
	}
}

func (r *modelRunner) onFire(pf *Fire) {
	f := *pf
	r.calls++
	if r.maxFires > 0 && r.calls > r.maxFires {
		r.failf("Advance fired more than max=%d times: %s", r.maxFires, fireString(f))
	}
	if r.unlimited && r.calls > modelFireLimit+cbAddLimit*cbAddRepeats+10 {
		r.failf("runaway Advance: more than %d firings", r.calls-1)
	}
	t := r.m.next(r.target)
	if t == nil {
		r.failf("wheel fired %s; model has nothing due at or before %d", fireString(f), r.target)
	}
	lvl := t.lvl
	want := r.m.fire(t)
	r.tracef("  fire %s", fireString(want))
	if f.Key != want.Key || f.Tick != want.Tick || f.Fired != want.Fired || f.Repeat != want.Repeat ||
		f.Last != want.Last || !bytes.Equal(f.Data, want.Data) {
		r.failf("firing #%d of this Advance: wheel %s, model %s", r.calls, fireString(f), fireString(want))
	}
	if r.record {
		f.Data = bytes.Clone(f.Data)
		r.fires = append(r.fires, f)
	}
	r.cov.fires++
	r.cov.fired[lvl]++
	if want.Last && want.Tick > math.MaxUint64-t.every && (t.repeat == 0 || t.fired < uint64(t.repeat)) {
		r.cov.lastOverflow++
	}
	if want.Tick == math.MaxUint64 {
		r.cov.fireAtMax++
	}
	if !want.Last {
		t.lvl = r.levelOf(want.Tick, t.due)
		r.cov.armed[t.lvl]++
	}
	if got := r.w.Now(); got != r.m.now {
		r.failf("inside fn for %s: Now()=%d, model %d", fireString(f), got, r.m.now)
	}
	if f.Tick < r.m.now {
		r.cov.lateFires++
	}
	r.checkKey(f.Key) // removed if Last, re-armed otherwise
	if r.src == nil {
		return
	}
	// Random actions from inside fn; both sides get the same ones.
	const ind = "    cb: "
	switch r.src.intn(20) {
	case 0:
		r.doCancel(r.pickKey(), ind)
	case 1:
		r.doCancel(f.Key, ind)
	case 2, 3:
		r.cbAdd(r.pickKey(), ind)
	case 4:
		r.cbAdd(f.Key, ind)
	case 5:
		r.doPause(r.pickKey(), ind)
	case 6:
		r.doPause(f.Key, ind)
	case 7:
		r.doResume(r.pickKey(), ind)
	case 8:
		if r.src.intn(4) == 0 {
			r.doCancelAll(r.recvs[r.src.intn(len(r.recvs))], ind)
		}
	case 9:
		r.checkAll()
		return
	default:
		return
	}
	r.cov.callbackOps++
	r.checkAll()
}

// cbAdd adds from inside fn. During an unlimited Advance the added timer gets
// a bounded Repeat and the number of such adds is capped, so the Advance ends.
func (r *modelRunner) cbAdd(k Key, ind string) {
	s := r.genSpec()
	if r.unlimited {
		if r.cbAdds >= cbAddLimit {
			return
		}
		r.cbAdds++
		if s.Repeat == 0 || s.Repeat > cbAddRepeats {
			s.Repeat = 1 + s.Repeat%cbAddRepeats
		}
	}
	r.doAdd(k, s, ind)
}

// ---------------------------------------------------------------------------
// State comparison

func (r *modelRunner) infoEqual(got, want Info) bool {
	return got.Key == want.Key && got.Due == want.Due && got.Remaining == want.Remaining &&
		got.Every == want.Every && got.Fired == want.Fired && got.Repeat == want.Repeat &&
		got.Paused == want.Paused && bytes.Equal(got.Data, want.Data)
}

func (r *modelRunner) checkKey(k Key) {
	want, merr := r.m.get(k)
	got, werr := r.w.Get(k)
	r.sameErr("Get", werr, merr)
	if merr == nil && !r.infoEqual(got, want) {
		r.failf("Get({%d %d}) at now=%d:\n\twheel %s\n\tmodel %s", k.Receiver, k.Tid, r.m.now, infoString(got), infoString(want))
	}
}

func (r *modelRunner) checkReceiver(recv uint64) {
	want := r.m.list(recv)
	if got := r.w.ReceiverLen(recv); got != len(want) {
		r.failf("ReceiverLen(%d)=%d, model %d", recv, got, len(want))
	}
	// List appends: keep a marker in front to see that dst is preserved.
	marker := Info{Key: Key{Receiver: 0xdead, Tid: uint64(r.op)}, Due: 7}
	dst := append(r.listBuf[:0], marker)
	got := r.w.List(recv, dst)
	r.listBuf = got
	if len(got) == 0 || got[0].Key != marker.Key || got[0].Due != marker.Due {
		r.failf("List(%d, dst) did not keep dst[0]", recv)
	}
	got = got[1:]
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = r.infoEqual(got[i], want[i])
	}
	if !ok {
		var b strings.Builder
		fmt.Fprintf(&b, "List(%d) at now=%d differs:\n\twheel:", recv, r.m.now)
		for _, in := range got {
			b.WriteString("\n\t  " + infoString(in))
		}
		b.WriteString("\n\tmodel:")
		for _, in := range want {
			b.WriteString("\n\t  " + infoString(in))
		}
		r.failf("%s", b.String())
	}
	r.checkListPage(recv, want)
}

// checkAll compares Now, Len, and Get/ReceiverLen/List of every key and
// receiver the run uses. With a large key space most calls check only
// ReceiverLen and a sample of keys.
func (r *modelRunner) checkAll() {
	if got := r.w.Now(); got != r.m.now {
		r.failf("Now()=%d, model %d", got, r.m.now)
	}
	if got := r.w.Len(); got != len(r.m.timers) {
		r.failf("Len()=%d, model %d", got, len(r.m.timers))
	}
	var bytes uint64
	for i := range r.m.timers {
		bytes += uint64(len(r.m.timers[i].data))
	}
	if got := r.w.DataBytes(); got != bytes {
		r.failf("DataBytes()=%d, model %d", got, bytes)
	}
	if r.checks++; len(r.recvs)*len(r.tids) > 64 && r.checks%16 != 0 {
		for _, recv := range r.recvs {
			if got, want := r.w.ReceiverLen(recv), len(r.m.list(recv)); got != want {
				r.failf("ReceiverLen(%d)=%d, model %d", recv, got, want)
			}
		}
		for i := 0; i < 16; i++ {
			k := Key{r.recvs[(r.checks+i)%len(r.recvs)], r.tids[(r.checks*7+i*13)%len(r.tids)]}
			if i%2 == 0 && len(r.m.timers) > 0 {
				k = r.m.timers[(r.checks*5+i)%len(r.m.timers)].key
			}
			r.checkKey(k)
		}
		return
	}
	for _, recv := range r.recvs {
		r.checkReceiver(recv)
		for _, tid := range r.tids {
			r.checkKey(Key{recv, tid})
		}
	}
	for _, t := range r.m.timers { // keys outside the key space (explicit tests)
		if !slices.Contains(r.recvs, t.key.Receiver) || !slices.Contains(r.tids, t.key.Tid) {
			r.checkKey(t.key)
			r.checkReceiver(t.key.Receiver)
		}
	}
}

// ---------------------------------------------------------------------------
// Random generation

func (r *modelRunner) pickKey() Key {
	return Key{r.recvs[r.src.intn(len(r.recvs))], r.tids[r.src.intn(len(r.tids))]}
}

func addSigned(v uint64, d int) uint64 {
	if d < 0 {
		return v - uint64(-d)
	}
	return v + uint64(d)
}

// boundary returns a tick near a multiple of slots^k after now: the start of
// the level-(k-1) slot (or level-k block) j+1 steps on, plus d.
func (r *modelRunner) boundary(k, j, d int) uint64 {
	now := r.m.now
	p := r.pw[k]
	if p == 0 { // beyond 2^64: the end of time
		return addSigned(math.MaxUint64, min(d, 0))
	}
	base := now - now%p
	hi, off := bits.Mul64(uint64(j+1), p)
	t, carry := bits.Add64(base, off, 0)
	if hi != 0 || carry != 0 {
		return addSigned(math.MaxUint64, min(d, 0))
	}
	return addSigned(t, d)
}

// genDelta returns a distance from now, mixing small values, slot and level
// boundaries, huge values and the 2^64 edge. 0 and overflowing values occur.
func (r *modelRunner) genDelta() uint64 {
	now := r.m.now
	s := r.src
	switch s.intn(16) {
	case 0:
		return 0
	case 1, 2, 3, 4:
		return 1 + uint64(s.intn(5))
	case 5, 6: // within the first levels
		n := uint64(65536)
		if p := r.pw[2]; p != 0 && 2*p < n {
			n = 2 * p
		}
		return 1 + uint64(s.intn(int(n)))
	case 7, 8: // slots^k ± 2
		k := s.intn(r.levels + 2)
		return addSigned(r.pw[k], s.intn(5)-2)
	case 9, 10, 11: // lands near a level-k boundary in absolute ticks
		k, j, d := s.intn(r.levels+2), s.intn(3), s.intn(5)-2
		return r.boundary(k, j, d) - now
	case 12:
		return s.u64()
	case 13: // due near 2^64-1; +1 and +2 overflow
		return addSigned(math.MaxUint64-now, s.intn(5)-2)
	case 14: // log-uniform
		b := s.intn(65)
		return s.u64() >> (64 - uint(b))
	default: // a whole number of level-k slots
		k := s.intn(r.levels + 1)
		return r.pw[k] * uint64(1+s.intn(r.slots))
	}
}

func (r *modelRunner) genSpec() Spec {
	s := r.src
	now := r.m.now
	var sp Spec
	if s.intn(6) == 0 {
		switch s.intn(6) {
		case 0:
			sp.At = now
		case 1:
			sp.At = now - uint64(s.intn(3))
		case 2:
			sp.At = math.MaxUint64 - uint64(s.intn(3))
		default:
			sp.At = now + r.genDelta()
		}
		if s.intn(4) == 0 {
			sp.After = 1 + uint64(s.intn(10)) // ignored when At is set
		}
	} else {
		sp.After = r.genDelta()
	}
	switch s.intn(10) {
	case 0, 1, 2, 3, 4:
		sp.Every = 0
	case 5, 6:
		sp.Every = 1 + uint64(s.intn(5))
	case 7:
		sp.Every = max(r.genDelta(), 1)
	case 8:
		sp.Every = s.u64() | 1<<63
	case 9:
		k := s.intn(r.levels + 1)
		sp.Every = max(addSigned(r.pw[k], s.intn(3)-1), 1)
	}
	sp.Repeat = uint32(s.intn(5))
	switch s.intn(8) {
	case 0:
		sp.Data = []byte{}
	case 1, 2:
		sp.Data = r.genData(1 + s.intn(16))
	case 3:
		sp.Data = r.genData(1 + s.intn(300))
	}
	sp.Replace = s.intn(4) == 0
	return sp
}

func (r *modelRunner) genData(n int) []byte {
	r.dataCtr++
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.dataCtr*131 + i*7)
	}
	return b
}

func (r *modelRunner) opAdvance() {
	s := r.src
	now := r.m.now
	clip := func(d uint64) uint64 { return now + min(d, math.MaxUint64-now) }
	c := s.intn(256)
	if c >= 240 && s.pos < len(s.data)*2/3 {
		c -= 80 // jumps to the end of time come late in a run, so that runs last
	}
	var to uint64
	switch {
	case c < 8: // no move, or an attempted rewind
		to = now - min(now, uint64(s.intn(3)))
	case c < 72:
		to = clip(uint64(s.intn(6)))
	case c < 104: // log-uniform distance
		b := s.intn(65)
		to = clip(s.u64() >> (64 - uint(b)))
	case c < 112:
		to = clip(r.genDelta())
	case c < 168: // around the due tick of the next timer, or of any
		if len(r.m.timers) == 0 {
			break
		}
		t := r.m.timers[s.intn(len(r.m.timers))]
		if c < 160 {
			if n := r.m.next(math.MaxUint64); n != nil {
				t = n
			}
		}
		to = addSigned(t.due, s.intn(3)-1)
		if t.paused {
			to = clip(t.remaining)
		}
	case c < 240: // around a slot or block boundary of some level
		k, j, d := s.intn(r.levels), s.intn(3), s.intn(5)-2
		to = r.boundary(k, j, d)
	case c < 244: // past the top level
		k, j, d := r.levels+s.intn(2), s.intn(3), s.intn(5)-2
		to = r.boundary(k, j, d)
	case c < 248:
		to = s.u64()
	case c < 250:
		to = math.MaxUint64
	default: // a level's distance before the end of time
		k := s.intn(r.levels + 1)
		to = addSigned(math.MaxUint64-r.pw[k]*uint64(1+s.intn(3)), s.intn(5)-2)
	}
	var mx int
	switch s.intn(8) {
	case 4:
		mx = -1 - s.intn(3)
	case 5, 6:
		mx = 1 + s.intn(3)
	case 7:
		mx = 1 + s.intn(40)
	}
	// A geometry whose levels span less than 2^64 keeps far timers in an
	// overflow list that the wheel places again at every turn of the top
	// level, so a jump costs (distance / top span) steps while that list is
	// not empty. Keep jumps within a bounded number of turns unless no timer
	// can run during the Advance (none, or all paused).
	if top := r.pw[r.levels]; top != 0 && slices.ContainsFunc(r.m.timers, func(t *refTimer) bool { return !t.paused }) {
		hi, lo := bits.Mul64(top, turnBudget)
		if hi == 0 && lo <= math.MaxUint64-now && to > now+lo {
			to = now + lo
		}
	}
	// Keep the Advance finite: forever timers with small intervals would fire
	// without end on a huge jump.
	if target := max(to, now); mx <= 0 && r.m.firingsUpTo(target, modelFireLimit) > modelFireLimit {
		if s.intn(3) == 0 || r.m.firingsUpTo(now, modelFireLimit) > modelFireLimit {
			mx = 1 + s.intn(modelFireLimit)
		} else {
			lo, hi := now, target // largest `to` with at most modelFireLimit firings
			for lo < hi {
				mid := lo + (hi-lo)/2 + 1
				if r.m.firingsUpTo(mid, modelFireLimit) <= modelFireLimit {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			to = lo
		}
	}
	r.doAdvance(to, mx)
}

// opBurst adds one spec under many keys, so that hundreds of timers share
// due ticks and the wheel sorts large batches by add sequence.
func (r *modelRunner) opBurst() {
	s := r.src
	sp := r.genSpec()
	if sp.At == 0 && (sp.After == 0 || sp.After > 1<<20) {
		sp.After = 1 + uint64(s.intn(300))
	}
	n := 100 + s.intn(400)
	off := s.intn(len(r.tids))
	replace := s.intn(3) // 0: none, 1: all, 2: every other
	r.tracef("burst of %d adds", n)
	for i := range n {
		k := Key{r.recvs[i%len(r.recvs)], r.tids[(off+i/len(r.recvs))%len(r.tids)]}
		sp.Replace = replace == 1 || replace == 2 && i%2 == 0
		r.doAdd(k, sp, "  ")
	}
}

func (r *modelRunner) step() {
	s := r.src
	switch c := s.intn(64); {
	case c < 1 && len(r.tids) >= 100:
		r.opBurst()
	case c < 23:
		r.doAdd(r.pickKey(), r.genSpec(), "")
	case c < 29:
		r.doCancel(r.pickKey(), "")
	case c < 33:
		k := r.pickKey()
		if s.intn(2) == 0 { // prefer a timer due now, left by an Advance stopped at max
			for _, t := range r.m.timers {
				if !t.paused && t.due == r.m.now {
					k = t.key
					break
				}
			}
		}
		r.doPause(k, "")
	case c < 37:
		k := r.pickKey()
		if s.intn(2) == 0 { // prefer a timer paused when it was due (Remaining 0)
			for _, t := range r.m.timers {
				if t.paused && t.remaining == 0 {
					k = t.key
					break
				}
			}
		}
		r.doResume(k, "")
	case c < 39:
		r.doCancelAll(r.recvs[s.intn(len(r.recvs))], "")
	default:
		r.opAdvance()
	}
}

// ---------------------------------------------------------------------------
// Driver

type modelResult struct {
	err     error
	op      int   // index of the failing op
	opStart []int // offset in the body where each op began
	end     int   // offset in the body at the failure
	trace   []string
}

// execOps decodes body into operations and applies them to a Wheel and the
// model, checking that they agree. It stops at the first disagreement.
func execOps(p modelParams, body []byte, tracing bool, cov *modelCoverage) (res modelResult) {
	src := &opSource{data: body}
	var r *modelRunner
	defer func() {
		e := recover()
		if e == nil {
			return
		}
		var msg string
		if mm, ok := e.(modelMismatch); ok {
			msg = string(mm)
		} else {
			msg = fmt.Sprintf("panic: %v\n%s", e, debug.Stack())
		}
		if r == nil {
			res.err = errors.New(msg)
			return
		}
		res.err = fmt.Errorf("%s, op #%d (wheel now %d, model now %d): %s", p, r.op, r.w.Now(), r.m.now, msg)
		res.op, res.opStart, res.trace, res.end = r.op, r.opStart, r.trace, min(src.pos, len(body))
	}()
	r = newModelRunner(p, src, cov)
	r.tracing = tracing
	r.tracef("New(%d, %+v)", p.start, p.cfg)
	for end := 0; !src.exhausted() && end < 30; {
		if r.m.now == math.MaxUint64 {
			end++ // little is left to do at the end of time
		}
		r.opStart = append(r.opStart, src.pos)
		r.tracef("#%d", r.op)
		r.step()
		r.checkAll()
		r.op++
		r.cov.ops++
	}
	if r.m.now == math.MaxUint64 {
		r.cov.ends++
	}
	return res
}

// shrinkOps removes operations from a failing body while it still fails.
func shrinkOps(p modelParams, body []byte, res modelResult) []byte {
	body = body[:res.end]
	for chunk := len(res.opStart); chunk >= 1; chunk /= 2 {
		for i := 0; ; {
			cur := execOps(p, body, false, nil)
			if cur.err == nil || i >= len(cur.opStart) {
				break
			}
			end := len(body)
			if i+chunk < len(cur.opStart) {
				end = cur.opStart[i+chunk]
			}
			cand := slices.Concat(body[:cur.opStart[i]], body[end:])
			if execOps(p, cand, false, nil).err != nil {
				body = cand
			} else {
				i++
			}
		}
	}
	return body
}

// runOps runs a test input (header and body, as decoded by decodeHeader) and
// fails t with a trace on disagreement.
func runOps(t testing.TB, data []byte, cov *modelCoverage) {
	t.Helper()
	p, body := decodeHeader(data)
	if len(body) > modelMaxBody {
		body = body[:modelMaxBody]
	}
	res := execOps(p, body, false, cov)
	if res.err == nil {
		return
	}
	shrunk := false
	if os.Getenv("WHEEL_SHRINK") != "" {
		body = shrinkOps(p, body, res)
		shrunk = true
	}
	res = execOps(p, body, true, nil)
	if res.err == nil {
		t.Fatalf("run failed, but its traced replay passed (nondeterminism?)")
	}
	tr := res.trace
	if !shrunk && len(tr) > 120 {
		tr = append([]string{fmt.Sprintf("… (%d earlier lines; WHEEL_SHRINK=1 shrinks the run)", len(tr)-120)}, tr[len(tr)-120:]...)
	}
	msg := fmt.Sprintf("%v\ntrace:\n%s", res.err, strings.Join(tr, "\n"))
	if shrunk && len(body) <= 2048 {
		in := append(data[:modelHeaderLen:modelHeaderLen], body...)
		msg += fmt.Sprintf("\nshrunk input, as a file for testdata/fuzz/FuzzOps:\ngo test fuzz v1\n[]byte(%q)", in)
	}
	t.Fatal(msg)
}

// seedBody returns n pseudo-random body bytes for seed.
func seedBody(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x7469636b77686565))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint64())
	}
	return b
}

// ---------------------------------------------------------------------------
// Tests

func TestModel(t *testing.T) {
	seeds, bodyLen := 24, 20000
	if testing.Short() {
		seeds, bodyLen = 4, 2000
	}
	for gi, cfg := range modelGeometries {
		levels, slots := geometryOf(cfg)
		pw := slotPowers(levels, slots)
		seeds := seeds
		if pw[levels] == 0 {
			// Without an overflow list nothing slows the walk to the end of
			// time, so runs are short: have more of them.
			seeds *= 6
		}
		cov := newModelCoverage(levels)
		t.Run(fmt.Sprintf("%dx%d", levels, slots), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(seeds) {
				rng := rand.New(rand.NewPCG(seed, uint64(gi)))
				var start uint64
				var kind string
				switch seed % 4 {
				case 0:
					kind = "zero"
				case 1:
					start, kind = rng.Uint64(), "random"
				case 2:
					start, kind = math.MaxUint64-1000, "nearmax"
					if seed%8 == 6 { // a level's distance before the end
						k := rng.IntN(levels + 1)
						start = math.MaxUint64 - pw[k]*(1+rng.Uint64N(3)) - rng.Uint64N(3)
					}
				case 3: // a few ticks before a level turns over
					k := 1 + rng.IntN(levels)
					start, kind = math.MaxUint64-3, "turnover"
					if pw[k] != 0 {
						start = pw[k]*(1+rng.Uint64N(3)) - 3
					}
				}
				ks := int(seed/4) % len(modelKeySpaces)
				hdr := encodeHeader(gi, start, ks, seed%3 == 2)
				data := append(hdr, seedBody(seed<<8|uint64(gi), bodyLen)...)
				t.Run(fmt.Sprintf("seed=%d/%s", seed, kind), func(t *testing.T) {
					runOps(t, data, cov)
				})
			}
			if t.Failed() {
				return
			}
			t.Logf("coverage: %d ops, %d runs reached the end; armed per level %v, fired per level %v (last = overflow list), fires %d, "+
				"last-by-2^64 %d, fires at 2^64-1 %d, max stops %d (%d finished), catch-ups %d, fires after their tick %d, pauses at 0 %d, resumes past 2^64 %d, callback ops %d",
				cov.ops, cov.ends, cov.armed, cov.fired, cov.fires, cov.lastOverflow, cov.fireAtMax, cov.maxStops, cov.maxStopDone, cov.catchUps, cov.lateFires, cov.pauseAtZero,
				cov.errs["Resume:ErrOverflow"], cov.callbackOps)
			if testing.Short() {
				return
			}
			// The runs must have reached every level, the overflow list when the
			// geometry has one, and the 2^64 edge.
			for k := range levels {
				if pw[k] == 0 || k > 0 && pw[k] > math.MaxUint64/2 {
					break // this level's slots start at or beyond 2^63: not every one is reachable
				}
				if cov.fired[k] == 0 {
					t.Errorf("no timer armed at level %d fired", k)
				}
			}
			if pw[levels] != 0 && cov.fired[levels] == 0 {
				t.Errorf("no timer from the overflow list fired")
			}
			// (Firings at 2^64-1 itself are a few per geometry at most, none
			// in some: TestFireAtEndOfTime covers them in each geometry.)
			if cov.lastOverflow == 0 {
				t.Errorf("2^64 edge not reached: last-by-overflow %d, fires at 2^64-1 %d", cov.lastOverflow, cov.fireAtMax)
			}
			if cov.maxStops == 0 || cov.callbackOps == 0 || cov.catchUps == 0 || cov.lateFires == 0 {
				t.Errorf("max stops %d, callback ops %d, catch-ups %d, fires after their tick %d", cov.maxStops, cov.callbackOps, cov.catchUps, cov.lateFires)
			}
		})
	}
}

// TestModelDesignExample runs the example of the design document through the
// model-vs-wheel runner and checks the firings against the document.
func TestModelDesignExample(t *testing.T) {
	const T = 1587848614
	p := modelParams{start: T, nRecv: 3, nTid: 8}
	r := newModelRunner(p, nil, nil)
	r.record, r.tracing = true, true
	err := func() (err error) {
		defer func() {
			if e := recover(); e != nil {
				err = fmt.Errorf("%v\n%s", e, strings.Join(r.trace, "\n"))
			}
		}()
		for _, a := range []struct {
			k Key
			s Spec
		}{
			{Key{1, 11}, Spec{After: 3, Repeat: 4}},
			{Key{1, 12}, Spec{After: 1, Repeat: 5}},
			{Key{2, 20}, Spec{After: 3, Repeat: 0}},
		} {
			if err := r.doAdd(a.k, a.s, ""); err != nil {
				return fmt.Errorf("Add(%v): %v", a.k, err)
			}
		}
		r.checkAll()
		for i := range uint64(15) {
			r.doAdvance(T+i+1, 0)
			r.checkAll()
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		tid, tick, fired uint64
		last             bool
	}
	want := []ev{
		{12, T + 1, 1, false},
		{12, T + 2, 2, false},
		// Receiver 1's first (11), receiver 2's first (20), then receiver 1's second.
		{11, T + 3, 1, false}, {20, T + 3, 1, false}, {12, T + 3, 3, false},
		{12, T + 4, 4, false},
		{12, T + 5, 5, true},
		{11, T + 6, 2, false}, {20, T + 6, 2, false},
		{11, T + 9, 3, false}, {20, T + 9, 3, false},
		{11, T + 12, 4, true}, {20, T + 12, 4, false},
		{20, T + 15, 5, false},
	}
	var got []ev
	for _, f := range r.fires {
		got = append(got, ev{f.Tid, f.Tick, f.Fired, f.Last})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("firings:\n got %v\nwant %v", got, want)
	}
	if n := r.w.Len(); n != 1 {
		t.Fatalf("Len() = %d after the example, want 1 (tid 20)", n)
	}
}

// TestModelSelf checks the model itself on a few hand-computed cases that the
// random runs rely on.
func TestModelSelf(t *testing.T) {
	m := &refModel{now: 10}
	if err := m.add(Key{1, 1}, Spec{}); err != ErrZeroAfter {
		t.Fatalf("zero spec: %v", err)
	}
	if err := m.add(Key{1, 1}, Spec{At: 10}); err != ErrPast {
		t.Fatalf("At now: %v", err)
	}
	if err := m.add(Key{1, 1}, Spec{After: math.MaxUint64 - 9}); err != ErrOverflow {
		t.Fatalf("overflow: %v", err)
	}
	if err := m.add(Key{1, 1}, Spec{After: math.MaxUint64 - 10, Repeat: 3}); err != nil {
		t.Fatal(err)
	}
	if err := m.add(Key{1, 1}, Spec{At: 5}); err != ErrPast { // validation before the duplicate check
		t.Fatalf("dup with bad spec: %v", err)
	}
	if err := m.add(Key{1, 1}, Spec{After: 2}); err != ErrExists {
		t.Fatalf("dup: %v", err)
	}
	if err := m.add(Key{1, 2}, Spec{At: 15}); err != nil {
		t.Fatal(err)
	}
	if in, _ := m.get(Key{1, 2}); in.Every != 5 || in.Due != 15 || in.Remaining != 5 {
		t.Fatalf("At timer: %+v", in)
	}
	f := m.fire(m.next(math.MaxUint64))
	if f.Tid != 2 || f.Tick != 15 || f.Last || m.now != 15 {
		t.Fatalf("first fire %+v now %d", f, m.now)
	}
	m.pause(Key{1, 2}) // due 20: remaining 5
	m.now = 100
	m.resume(Key{1, 2})
	if in, _ := m.get(Key{1, 2}); in.Due != 105 || in.Fired != 1 {
		t.Fatalf("resumed: %+v", in)
	}
	if err := m.pause(Key{1, 2}); err != nil || m.pause(Key{1, 2}) != ErrPaused || m.resume(Key{1, 1}) != ErrNotPaused {
		t.Fatalf("pause twice / resume unpaused: %v", err)
	}
	if m.cancel(Key{1, 2}) != nil || m.cancel(Key{1, 2}) != ErrNotFound {
		t.Fatal("cancel")
	}
	f = m.fire(m.next(math.MaxUint64))
	if f.Tick != math.MaxUint64 || !f.Last || f.Fired != 1 || m.find(Key{1, 1}) >= 0 {
		t.Fatalf("edge fire %+v", f)
	}
}

// FuzzOps decodes the input into a geometry, a start tick and an operation
// sequence, and compares the Wheel against the model on it.
func FuzzOps(f *testing.F) {
	for i, s := range []struct {
		geom  int
		start uint64
		ks    int
	}{
		{0, 0, 0},
		{1, 5, 0},
		{2, math.MaxUint64 - 100, 2},
		{3, 9995, 0},
		{4, 1 << 40, 2},
		{6, math.MaxUint64 - 70000, 3},
		{7, 1<<64 - 1<<56, 0},
		{8, 65*65 - 2, 1},
	} {
		f.Add(append(encodeHeader(s.geom, s.start, s.ks, i%2 == 1), seedBody(uint64(1000+i), 600)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > modelHeaderLen+2048 {
			data = data[:modelHeaderLen+2048] // longer inputs make slow runs and slow minimization
		}
		runOps(t, data, nil)
	})
}

// A timer due at 2^64-1 fires there, in every model geometry, also when
// it falls due while a backlog drains (a bounded Advance left timers due
// on an earlier tick): the model runs reach this edge only a few times per
// geometry.
func TestFireAtEndOfTime(t *testing.T) {
	for _, cfg := range modelGeometries {
		for _, start := range []uint64{math.MaxUint64 - 30, math.MaxUint64 - 1000} {
			w := newWheel(t, start, cfg)
			require.NoError(t, w.Add(Key{1, 1}, Spec{At: math.MaxUint64}))
			require.NoError(t, w.Add(Key{2, 1}, Spec{At: math.MaxUint64 - 5, Repeat: 1}))
			require.NoError(t, w.Add(Key{2, 2}, Spec{At: math.MaxUint64 - 5, Repeat: 1}))
			var got []Fire
			n, done := w.Advance(math.MaxUint64, 1, func(f *Fire) { got = append(got, *f) })
			require.Equal(t, 1, n)
			require.False(t, done)
			_, done = w.Advance(math.MaxUint64, 0, func(f *Fire) { got = append(got, *f) })
			require.True(t, done)
			require.Len(t, got, 3, "%+v", cfg)
			assert.Equal(t, Key{2, 2}, got[1].Key)
			assert.Equal(t, uint64(math.MaxUint64-5), got[1].Tick)
			assert.Equal(t, Key{1, 1}, got[2].Key)
			assert.Equal(t, uint64(math.MaxUint64), got[2].Tick)
			assert.True(t, got[2].Last)
			assert.Equal(t, 0, w.Len())
		}
	}
}
