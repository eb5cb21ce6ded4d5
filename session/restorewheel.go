package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tickwheel/tickwheel/wheel"
)

// restorePiece is how many snapshot bytes restoreWheel writes to the
// Restorer between two marks for the index builder: about 17k timers, whose
// nodes (1 MB) are still in the cache when the builder, keeping up, reads
// their keys.
// It is also the size of the reads of a snapshot streamed from a reader.
const restorePiece = 256 << 10

// markQueue is how many marks the decoding may be ahead of the index
// builder (wheel.RestoreMark, 32 bytes each; 4096 pieces are 1 GiB of
// snapshot, about 70M timers). The builder's work comes in bursts: a big
// index's buckets fill about half way through the records and are each
// inserted there and then (wheel.IndexPart), about 1.4 s at 100M timers.
// With 16 marks the decoding waited out that burst: a 100M restart's
// progress stood still for a second at 53%, and the restart took 9.2-10.0
// s where letting the decoding run on took 7.6-8.1 s (the builder catches
// up before the decoding ends; docs/BENCHMARKS.md). The nodes behind a
// mark are in the slab either way: a longer queue holds no more memory.
const markQueue = 4096

// restoreWheel restores the wheel snapshot b. See restoreWheelFrom.
func restoreWheel(b []byte) (*wheel.Wheel, error) {
	return restoreWheelFrom(b, nil, nil, 0)
}

// restoreWheelFrom restores the wheel snapshot whose first bytes are b and
// whose rest, if rd is not nil, is read from rd to its io.EOF, a piece of
// restorePiece bytes at a time into one buffer (the file is not held
// whole: the reads of a large snapshot from the page cache go into a
// buffer the cache holds, rather than into gigabytes of fresh memory). An
// error of rd's (other than io.EOF) is returned as a readError.
//
// With more than one CPU (GOMAXPROCS) the wheel's key index is built on a
// second goroutine while this one decodes the records
// (wheel.IndexBuilder): the index cost about as much as the decoding, a
// cache miss per timer; and a third has the kernel back the nodes' memory
// with RAM ahead of the decoding (wheel.Prefaulter). A big index is filled
// a region of its table at a time once the records are read
// (wheel.IndexPart), on both goroutines. The wheel is the same either
// way. The goroutines end before restoreWheelFrom returns.
//
// Each goroutine logs the end of its phase to log at debug level (nil: no
// log), the record's time being when it ended: "restore: records decoded",
// "restore: index builder done", "restore: prefaulter done", "restore:
// index part filled" (one a part) and "restore: wheel built". That is the
// restart's timeline (docs/BENCHMARKS.md), which goroutine ends last and
// where a core idles.
//
// eager, when not 0, is a trusted bound of the timers the snapshot holds
// (Config.RestoreTimers): their memory is backed at once, after the
// header, on every core (wheel.Prefaulter.Back), the decoding waiting;
// the prefaulter then follows the decoding for the rest.
func restoreWheelFrom(b []byte, rd io.Reader, log *slog.Logger, eager uint64) (*wheel.Wheel, error) {
	r, err := wheel.NewRestorer(wheel.Config{})
	if err != nil {
		return nil, err
	}
	aside := runtime.GOMAXPROCS(0) > 1
	var marks chan wheel.RestoreMark
	var ib *wheel.IndexBuilder
	done := make(chan struct{})
	defer func() {
		if marks != nil { // the builder's last Add returns before Wheel
			close(marks)
			<-done
		}
	}()
	var pf prefaulting
	defer pf.stop()
	next := pieces(b, rd)
	for {
		p, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readError{err}
		}
		if _, err := r.Write(p); err != nil {
			return nil, err
		}
		if !aside {
			continue
		}
		if marks == nil {
			if ib = r.IndexBuilder(); ib == nil {
				continue
			}
			marks = make(chan wheel.RestoreMark, markQueue)
			go buildIndex(ib, marks, done, log)
			if pre := r.Prefaulter(); pre != nil && eager > 0 {
				pre.Back(eager, runtime.GOMAXPROCS(0)) // on every core, the decoding waiting
				debug(log, "restore: memory backed ahead", "timers", eager)
			}
			pf.start(r.Prefaulter(), log)
		}
		mark := r.Ready()
		pf.tell(mark)
		marks <- mark
	}
	debug(log, "restore: records decoded")
	pf.stop() // before the fill, which writes the index's table
	if marks != nil {
		close(marks)
		<-done
		marks = nil
		fillIndex(ib.Parts(fillParts), log)
	}
	w, err := r.Wheel()
	if err == nil {
		debug(log, "restore: wheel built", "timers", w.Len())
	}
	return w, err
}

// debug logs msg and args at debug level to log, if not nil.
func debug(log *slog.Logger, msg string, args ...any) {
	if log != nil {
		log.Log(context.Background(), slog.LevelDebug, msg, args...)
	}
}

// fillParts is how many parts a big restored index is filled in: more
// than the goroutines filling them (fillIndex), so that one finishing
// early takes another rather than waiting for the slower (two parts of a
// 100M index ended 0.31 s apart, one core idle meanwhile). A part's
// entries whose probe runs cross its end are inserted after the fill: a
// few more with each part.
const fillParts = 16

// fillIndex fills the parts on GOMAXPROCS goroutines (this one among
// them), each taking the next part not taken until none is left, and
// returns when all are filled. Each part filled is logged at debug level.
func fillIndex(parts []*wheel.IndexPart, log *slog.Logger) {
	var next atomic.Int32
	fill := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(parts) {
				return
			}
			parts[k].Fill()
			debug(log, "restore: index part filled", "part", k)
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(parts)) - 1 {
		wg.Go(fill)
	}
	fill()
	wg.Wait()
}

// prefaulting runs a wheel.Prefaulter on a goroutine of its own: the
// kernel clears the pages of the nodes there, ahead of the decoding, on
// the CPU time the decoding and the index builder leave (a 100M restore
// kept two cores about 84% busy). Its marks are the latest the decoding
// gave: a mark it had no time for is skipped, not queued. While no mark
// waits it populates the table of a partitioned index a step at a time
// (wheel.Prefaulter.Index), up to the decoded records' share, so that the
// fill after the last record does not clear those pages; it ends before
// the fill.
type prefaulting struct {
	marks chan wheel.RestoreMark
	done  chan struct{}
}

func (p *prefaulting) start(pf *wheel.Prefaulter, log *slog.Logger) {
	if pf == nil {
		return
	}
	p.marks, p.done = make(chan wheel.RestoreMark, 1), make(chan struct{})
	go func() {
		defer close(p.done)
		defer debug(log, "restore: prefaulter done")
		var last wheel.RestoreMark
		for {
			select {
			case m, ok := <-p.marks:
				if !ok {
					return
				}
				pf.Upto(m)
				last = m
				continue
			default:
			}
			if pf.Index(last) { // no mark waiting: a step of the index's table
				continue
			}
			m, ok := <-p.marks
			if !ok {
				return
			}
			pf.Upto(m)
			last = m
		}
	}()
}

func (p *prefaulting) tell(m wheel.RestoreMark) {
	if p.marks == nil {
		return
	}
	select {
	case p.marks <- m:
	default:
	}
}

// stop ends the goroutine, and waits for it.
func (p *prefaulting) stop() {
	if p.marks != nil {
		close(p.marks)
		<-p.done
		p.marks = nil
	}
}

// readError is an error of the reader a snapshot is read from, as it is.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// pieces returns a function that returns b a restorePiece at a time, then
// what rd reads (nil: nothing), in pieces of up to restorePiece bytes in
// one buffer, valid until the next call; then io.EOF, or rd's error.
func pieces(b []byte, rd io.Reader) func() ([]byte, error) {
	var buf []byte
	return func() ([]byte, error) {
		if len(b) > 0 {
			k := min(len(b), restorePiece)
			p := b[:k]
			b = b[k:]
			return p, nil
		}
		if rd == nil {
			return nil, io.EOF
		}
		if buf == nil {
			buf = make([]byte, restorePiece)
		}
		n, err := io.ReadFull(rd, buf)
		switch {
		case err == nil:
			return buf[:n], nil
		case n > 0 && errors.Is(err, io.ErrUnexpectedEOF):
			rd = nil // the last piece: the next call returns io.EOF
			return buf[:n], nil
		}
		return nil, err
	}
}

// coreFirstRead is how many bytes restoreCoreFrom reads first (a
// variable for the tests, which make the section longer than it).
var coreFirstRead = 4 * restorePiece

// restoreCoreFrom reads the core section of a snapshot from rd into c,
// reading as much as it needs: the first coreFirstRead bytes, then twice
// as many as long as the section goes on past them (each try decodes the
// section again into a new Core, at most about twice the section's cost in
// all; the section's length is bounded by the file's, as when it is read
// whole). It returns the Core, the bytes read after the section, which
// begin the wheel's snapshot, and the reader of the rest (nil when rd
// ended within the bytes read). The Core's fields may be views of the
// bytes read: they are never reused.
func restoreCoreFrom(rd io.Reader, newCore func() *Core) (*Core, []byte, io.Reader, error) {
	buf := make([]byte, 0, coreFirstRead)
	for {
		n, err := io.ReadFull(rd, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		eof := err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return nil, nil, nil, err
		}
		c := newCore()
		rest, cerr := c.restoreCore(buf)
		if cerr == nil {
			if eof {
				rd = nil
			}
			return c, rest, rd, nil
		}
		if eof || !errors.Is(cerr, errShort) {
			return nil, nil, nil, cerr
		}
		buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
	}
}

// buildIndex adds the nodes of each mark received to the index, until
// marks is closed, and then closes done; while no mark waits it inserts a
// bucket of a big index ahead of the fill (wheel.IndexBuilder.Tidy). After
// a duplicate key it only drains marks: Restorer.Wheel reports the error.
func buildIndex(ib *wheel.IndexBuilder, marks <-chan wheel.RestoreMark, done chan<- struct{}, log *slog.Logger) {
	defer close(done)
	ok := true
	for {
		var m wheel.RestoreMark
		var more bool
		select {
		case m, more = <-marks:
		default:
			if ib.Tidy() {
				continue
			}
			m, more = <-marks
		}
		if !more {
			break
		}
		ok = ok && ib.Add(m)
	}
	debug(log, "restore: index builder done")
}
