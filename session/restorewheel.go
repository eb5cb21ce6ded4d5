package session

import (
	"runtime"

	"github.com/tickwheel/tickwheel/wheel"
)

// restorePiece is how many snapshot bytes restoreWheel writes to the
// Restorer between two marks for the index builder: about 17k timers, whose
// nodes (1 MB) are still in the cache when the builder reads their keys.
const restorePiece = 256 << 10

// restoreWheel restores the wheel snapshot b. With more than one CPU
// (GOMAXPROCS) the wheel's key index is built on a second goroutine while
// this one decodes the records (wheel.IndexBuilder): the index cost about
// as much as the decoding, a cache miss per timer. The wheel is the same
// either way. The goroutine ends before restoreWheel returns.
func restoreWheel(b []byte) (*wheel.Wheel, error) {
	r, err := wheel.NewRestorer(wheel.Config{})
	if err != nil {
		return nil, err
	}
	aside := runtime.GOMAXPROCS(0) > 1
	var marks chan wheel.RestoreMark
	done := make(chan struct{})
	defer func() {
		if marks != nil { // the builder's last Add returns before Wheel
			close(marks)
			<-done
		}
	}()
	for len(b) > 0 {
		k := min(len(b), restorePiece)
		if _, err := r.Write(b[:k]); err != nil {
			return nil, err
		}
		b = b[k:]
		if !aside {
			continue
		}
		if marks == nil {
			ib := r.IndexBuilder()
			if ib == nil {
				continue
			}
			marks = make(chan wheel.RestoreMark, 16)
			go buildIndex(ib, marks, done)
		}
		marks <- r.Ready()
	}
	if marks != nil {
		close(marks)
		<-done
		marks = nil
	}
	return r.Wheel()
}

// buildIndex adds the nodes of each mark received to the index, until
// marks is closed, and then closes done. After a duplicate key it only
// drains marks: Restorer.Wheel reports the error.
func buildIndex(ib *wheel.IndexBuilder, marks <-chan wheel.RestoreMark, done chan<- struct{}) {
	defer close(done)
	ok := true
	for m := range marks {
		ok = ok && ib.Add(m)
	}
}
