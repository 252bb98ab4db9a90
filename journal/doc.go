// Package journal makes commands durable before they are acknowledged: a
// write-ahead log (WAL) of sequenced commands and a store of state
// snapshots.
//
// Durability contract: an entry is acknowledged only after AppendBatch
// returned nil, i.e. after it was written and fsynced (plus a directory
// fsync whenever a segment file may have been created). A crash at any
// instant loses no acknowledged entry. At start-up a torn or damaged TAIL of
// the last segment is truncated back to the last whole entry (with a
// warning); damage anywhere else stops Open with a *CorruptError naming the
// seq (errors.Is(err, ErrCorrupt)); nothing is ever skipped silently. A
// failed write or fsync is sticky: the WAL refuses all further work with an
// error matching ErrFailed and never retries the fsync.
//
// # WAL on disk
//
// The WAL is a directory of github.com/tidwall/wal segment files in its
// binary format. A segment is named by the seq of its first entry (20
// decimal digits) and holds consecutive entries; the tidwall index of an
// entry always equals its seq. Each tidwall entry is a uvarint length
// followed by that many bytes, and those bytes are an envelope:
//
//	segment 00000000000000001001
//	+--------------+-----------------------------------+--------------+----
//	| uvarint(len) | envelope (len bytes) for seq 1001 | uvarint(len) | ...
//	+--------------+-----------------------------------+--------------+----
//
//	envelope (all integers little-endian)
//	 0        8        12       16
//	+--------+--------+--------+---------------------+
//	| seq    | plen   | crc    | payload (plen bytes) |
//	| uint64 | uint32 | uint32 |                      |
//	+--------+--------+--------+---------------------+
//	crc = CRC-32C (Castagnoli) over seq, plen and payload
//
// The journal writes these files itself, exactly as tidwall's writer would
// (segment_writer.go: one write and one fdatasync per batch, nothing held in
// memory); tidwall opens the WAL once at start-up as a cross-check. A new
// segment file starts right after the entry that brings the current one to
// Options.SegmentSize (default 1 MiB), inside a batch if need be; the part
// before the cut is fdatasynced before the new file is created, so only the
// last file can hold a torn write. An empty segment file is valid: it fixes
// the next seq (a fresh WAL created with Options.FirstSeq = S+1 is one empty
// file named S+1). TruncateFront deletes whole segment files only.
//
// While the WAL is open, the last segment is preallocated: zero-filled to
// Options.SegmentSize and written in place (a spare for the next segment is
// prepared as "segment.spare", a name tidwall ignores), because an
// fdatasync that must also commit a grown file size costs several times
// more (segment_writer.go). A zero byte where an entry would start,
// followed only by zeros to the end of the file, ends the entries; zeros
// after the entries of any other segment are corruption. Close, and Open
// after a crash, cut the zeros off before tidwall's cross-check.
//
// # Snapshots on disk
//
// One file per snapshot, snapshot-<20-digit seq>.snap, written to a temp
// file (snapshot-*.tmp), fsynced, renamed, and the directory fsynced:
//
//	 0          8         12       20       28       32       36
//	+----------+---------+--------+--------+--------+--------+------------+
//	| UBSCSNAP | version | seq    | len    | crc    | hcrc   | data (len) |
//	| magic    | uint32  | uint64 | uint64 | uint32 | uint32 |            |
//	+----------+---------+--------+--------+--------+--------+------------+
//	crc = CRC-32C of data, hcrc = CRC-32C of bytes 0..31
//
// # Recovery
//
// Load the newest usable snapshot (it checksums, decodes, the WAL continues
// it and its state breaks no invariant nothing halts; otherwise the previous
// one, then the empty state with S = 0 if the WAL still starts at seq 1),
// Open the WAL with Options.FirstSeq = S+1 (used only if the WAL is new) and
// replay with Iterate(S+1, ...); Iterate fails with ErrOutOfRange if entries
// after S were already truncated away. The next command gets seq
// LastSeq()+1. What still breaks invariants after the replay is halted by
// the pipeline with journaled breaker trips (RECOVERY_FAILED): recovery
// degrades, it does not refuse to start (checker.go, recovered.go).
//
// # Followers and runtime protection
//
// Followers (the Postgres sink, later the event publisher) read the durable
// WAL on their own replica; Retention keeps the WAL back to the slowest
// follower's checkpoint, up to a bound. A command whose per-command checks
// fail is discarded like a poison command (a core.Rollback carried to the
// read view, replay and followers), and RunChecker runs the full check on
// the read view every interval, turning violations into breaker trips.
package journal
