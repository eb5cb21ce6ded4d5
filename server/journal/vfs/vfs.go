// Package vfs is the file layer the journal writes its log through: the
// operating system's (OS), or, in tests, Faulty, which keeps the bytes
// written but not fsynced apart so that a simulated power cut can drop or
// tear them, and fails chosen calls with ENOSPC, EIO or a short write (as
// CockroachDB's and etcd's fault-injecting file systems do; STYLE 17).
//
// Only the log's write path goes through it: opening, writing, cutting
// back, fsyncing and closing segment files, and fsyncing the directory.
// Open's scan and snapshots use the os package directly, which reads the
// same files: Faulty works on real files in a real directory.
package vfs

import "os"

// FS opens files for writing and syncs directories.
type FS interface {
	// OpenFile opens name as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// SyncDir fsyncs directory dir, so that files created, renamed or
	// deleted in it stay so after a crash.
	SyncDir(dir string) error
}

// File is an open file of an FS. WriteAt and Truncate are called from one
// goroutine; Sync may run concurrently with them (the journal's background
// fsync), as fdatasync(2) may.
type File interface {
	Name() string
	WriteAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
	// Sync flushes the file's data and the metadata needed to read it back
	// (fdatasync(2) on Linux, fsync elsewhere). After a failed Sync the
	// bytes written since the last successful one may be lost even if a
	// later Sync succeeds (the kernel may have dropped the dirty pages):
	// the caller must write them again.
	Sync() error
	// Size returns the file's size.
	Size() (int64, error)
	Close() error
}

// OS is the operating system's file layer.
type OS struct{}

// OpenFile opens name with os.OpenFile.
func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// SyncDir opens dir and fsyncs it.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ *os.File }

func (f osFile) Sync() error { return datasync(f.File) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
