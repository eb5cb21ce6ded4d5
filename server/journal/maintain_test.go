package journal

import (
	"sync"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/server/journal/vfs"
)

// stallDirFS is the operating system's file system whose SyncDir, once
// stalled, waits until released: a slow deletion of covered segments
// (the directory's fsync follows it).
type stallDirFS struct {
	vfs.OS
	mu      sync.Mutex
	stalled chan struct{} // nil: SyncDir does not wait
}

func (f *stallDirFS) stall() {
	f.mu.Lock()
	f.stalled = make(chan struct{})
	f.mu.Unlock()
}

func (f *stallDirFS) release() {
	f.mu.Lock()
	if f.stalled != nil {
		close(f.stalled)
		f.stalled = nil
	}
	f.mu.Unlock()
}

func (f *stallDirFS) SyncDir(dir string) error {
	f.mu.Lock()
	c := f.stalled
	f.mu.Unlock()
	if c != nil {
		<-c
	}
	return f.OS.SyncDir(dir)
}

// The segments a snapshot covers are deleted off the goroutine that
// appends, the server's event loop: Append returns while their deletion
// (here its directory fsync) is held up, and the segments are gone after.
func TestCoveredSegmentsDeletedOffTheAppender(t *testing.T) {
	dir := t.TempDir()
	fs := &stallDirFS{}
	j := mustOpen(t, Options{Dir: dir, Sync: SyncNo, SegmentSize: 4 << 10, FS: fs})
	defer fs.release()
	appendRecs(t, j, 1, 200, 100)
	s1 := snapshotAt(t, j, snapContent(200))
	appendRecs(t, j, 201, 400, 100)
	snapshotAt(t, j, snapContent(400))
	fs.stall()
	appended := make(chan error, 1)
	go func() {
		_, err := j.Append(recBytes(401, 100)) // starts the deletion of the segments snapshot 200 covers
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		fs.release()
		t.Fatal("Append waited for the deletion of the segments the snapshot covers")
	}
	fs.release()
	j.waitDeletions()
	for _, f := range segFiles(t, dir) {
		if id := segID(f); id <= int64(j.snapSeg) && id < int64(j.act.id) && lastOf(t, f) <= s1 {
			t.Fatalf("segment %s covered by snapshot %d not deleted", f, s1)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}
