// Package journal is the server's durable storage: a write-ahead log of the
// service's inputs, one record per event-loop turn, plus periodic snapshots.
//
// # Use
//
// At start-up the server calls [Open], loads [Journal.Snapshot] (if any),
// applies every record [Journal.Replay] yields (those after the snapshot's
// index), and then, from its event loop only, calls [Journal.Append] once per
// turn. With [SyncAlways] it calls [Journal.Sync] once per turn before sending
// that turn's replies (group commit); with [SyncEverySec] the journal fsyncs
// about once a second from a goroutine of its own; with [SyncNo] it fsyncs
// only when a segment fills, at snapshots and at [Journal.Close]. Now and
// then the loop calls [Journal.CreateSnapshot] with the last index it
// appended and hands the returned [SnapshotWriter] to an encoder goroutine,
// which writes the state and calls [SnapshotWriter.Commit]. About once a
// second it calls [Journal.Checkpoint], so that a later Open notices a log
// whose end is missing.
//
// # Files in Options.Dir
//
//	LOCK                                  flock(2)ed while a Journal has the directory open
//	000000001.seg, 000000002.seg, ...     log segments (rosedblabs/wal format), oldest first
//	snap-00000000000000001234.snap        a committed snapshot covering records <= 1234
//	snap-....snap.tmp                     a snapshot being written; removed by Open
//	snap-....snap.corrupt                 a snapshot that failed verification; kept for the operator
//	TAIL                                  the last Checkpoint: how far the log reached (see Recovery)
//	repaired-20261126T172238Z/            what Options.Repair cut or moved out of the log, kept for the operator
//
// A segment file is a sequence of 32 KiB blocks. A block holds chunks, each a
// 7-byte header (CRC-32/IEEE of the rest of the chunk, little-endian uint16
// length, type: 0 full, 1 first, 2 middle, 3 last) and its data; a record
// that does not fit in what is left of a block is split into first, middle
// and last chunks, and a block with 7 bytes or fewer left is padded with
// zeros. Each record's data is the record's index as a uvarint followed by
// the bytes given to Append; indexes are consecutive from 1 across restarts
// and segments, so replay detects a missing or repeated record.
//
// A snapshot file is a 20-byte header (magic "TICKSNAP", format version 1 as
// a little-endian uint32, the covered index as a little-endian uint64), the
// encoder's bytes, and a 12-byte trailer: the payload length (uint64) and a
// CRC-32C (Castagnoli) over everything before the CRC (uint32), both
// little-endian.
//
// # Recovery
//
// Open picks the newest snapshot whose header and length are right (renaming
// a bad one to .corrupt and falling back to the one before), then reads
// every segment. It does not read the snapshot's payload: the reader
// [Journal.Snapshot] returns checks the CRC as the caller restores from it,
// and a caller whose read fails calls [Journal.RejectSnapshot] (the file
// becomes .corrupt) and opens the journal again, which falls back to the
// previous snapshot. Until the payload has been read whole and found good,
// Open's retention is held back: it deletes no snapshot and no segment, so
// the fallback is always there. With Options.Repair, Open reads and checks
// each snapshot whole first, as before a repair it must know which one it
// starts from. A snapshot starts a new segment, so the record after it is the
// first of its segment; the records before it are never replayed, so a bad
// record among them is logged and skipped, never fatal: one in a segment
// followed by a segment that starts at or below snapshot+1, or one followed
// in its own segment by a valid record at or below snapshot+1 (Replay then
// starts after it). A torn tail is cut off, with a log line naming the file
// and the bytes dropped: the last segment ends inside a record, or in bytes
// that are not a valid record and are followed by no valid record. A power
// cut leaves only bytes that were never fsynced in a bad state, but a disk
// may store them out of order (a later sector, not an earlier one), so a
// bad record in the last segment followed by valid ones is a torn tail too
// when neither it nor any record after it is at or below the last index
// known fsynced (TAIL's, or the snapshot's): none of them was fsynced, as
// fdatasync covers every byte written before it. That cut also names the
// records cut and keeps a copy of the segment as it was in a
// repaired-<time> directory. With no readable TAIL such a bad record is
// damage, unless its header is all zeros (a sector never written). Any
// other bad chunk — in an earlier segment (each was fsynced before the
// next was started), at or below TAIL's index, or followed by a record at
// or below it — or an index out of sequence is a [*CorruptError] naming
// the file, the byte offset and what a cut there would lose (the records
// from the first one the snapshot does not cover up to the highest one
// still readable after it, and the bytes).
//
// A log that ends early looks complete: a deleted last segment leaves one
// that simply stops. So the caller calls [Journal.Checkpoint] now and then
// (the server once a second), which writes the TAIL file: the last index
// known fsynced and a note of the caller's (the server's number of timers),
// one small write without fsync, never ahead of the log. Open writes (and
// fsyncs) a first TAIL for a new log, and a Close that made every record
// durable writes a last one (so that a bad record found after a clean stop
// is damage, never a torn tail). TAIL has three 36-byte slots in
// different sectors: Open's for a new log, fsynced and never written again,
// and two that Checkpoint and Close write in turn, so that a write torn by
// a power cut spoils one slot only and an older TAIL (never ahead of the
// log) still reads. Open fails with a [*TailError] when the log
// and snapshot end before TAIL's index. A TAIL with no good slot is logged
// and ignored: it loses the check, never the log.
//
// With Options.Repair, Open cuts the log at the bad record and accepts a
// missing end instead, deleting nothing: a copy of the cut segment, every
// later segment and TAIL are moved into a new directory repaired-<time> in
// Dir, and [Journal.Repaired] says which records were lost, the bytes cut,
// where they are kept and what TAIL last recorded.
//
// Commit keeps the newest Options.KeepSnapshots snapshots (2 by default) and
// deletes only the segments wholly covered by the oldest one kept, so a
// snapshot that later fails its CRC still leaves the previous snapshot plus
// a log that reaches it.
//
// While it is written, the active segment may be preallocated
// (Options.Preallocate): its file then ends in zeros after the last record.
// Zeros where a record would start, to the end of the file, are the log's
// end, not a torn tail; Close and rotation cut them off. A chunk header of
// zeros followed by valid records in the last segment is a torn tail even
// without TAIL (a sector whose write the disk lost while later ones were
// stored), unless TAIL records one of them as fsynced.
//
// # The format is github.com/rosedblabs/wal v1.3.8's
//
// The segments were written by that library until the journal needed to
// preallocate them: it opens segment files with O_APPEND, so every write
// lands at the file's size, after any preallocated zeros. The journal now
// writes the same bytes itself (segment.go, checked against the library in
// TestFormatMatchesLibrary): one pwrite(2) per record at the end of its
// records, fsynced on the same descriptor by the loop (SyncAlways) or by a
// goroutine of ours (SyncEverySec) without blocking writes. The format was
// chosen over github.com/tidwall/wal v1.2.1, which keeps no checksum at all
// (a flipped bit would be replayed as data) and refuses to open a log with
// a torn tail, so every crash during a write would become a refusal to
// start. The rest was always ours: a strict scanner (the library's Reader
// panics on a corrupt length field and accepts chunk types out of order)
// that cuts a torn tail, an index inside each record, truncation of the
// active segment after a failed write, and deletion of covered segments.
// The Append path allocates nothing in the steady state.
//
// # Write and fsync failures
//
// The segments are written through Options.FS (package vfs: the operating
// system's, or vfs.Faulty in tests). A failed write leaves the record in
// memory, the segment is cut back to its good records, and the write is
// retried. A failed fsync is never retried as such: Linux may have marked
// the pages it failed on clean (PostgreSQL's "fsyncgate"), so a later fsync
// could succeed without them. The records since the last good fsync are
// kept in memory for this, the segment is cut back to them and they are
// written again; Append and Healthy report the failure until an fsync of
// the rewritten bytes (Sync) succeeds. A rotation fsyncs the full segment
// and, if it is new since, the directory before counting its records
// durable. The loop's fsyncs (Sync, rotation) and SyncEverySec's background
// one are serialized, and the loop's counts for nothing if a background
// one failed since the loop last looked: that one may have dropped pages
// the loop's then found clean (a rotation counted such a segment durable,
// and a power cut lost its records; found by TestPowerLoss).
package journal
