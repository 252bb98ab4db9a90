package journal

import (
	"encoding/binary"
	"hash/crc32"
)

// EnvelopeHeaderSize is the size of the envelope header that precedes every
// payload in the WAL: seq (8) + payload length (4) + CRC-32C (4).
const EnvelopeHeaderSize = 16

// MaxPayloadSize is the largest payload AppendBatch accepts. The envelope
// format itself could carry up to 4 GiB-1 bytes; the limit keeps a single
// entry (which tidwall/wal holds in memory together with its whole segment)
// sane.
const MaxPayloadSize = 64 << 20

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2/ARMv8
// instructions for it when available.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EnvelopeError is the type of every error DecodeEnvelope returns. All of
// them match ErrCorrupt with errors.Is. The values are preallocated so a
// failed decode never allocates.
type EnvelopeError struct{ reason string }

func (e *EnvelopeError) Error() string { return "journal: " + e.reason }

// Is makes every envelope error match ErrCorrupt.
func (e *EnvelopeError) Is(target error) bool { return target == ErrCorrupt }

// Reason is the bare reason, without the package prefix.
func (e *EnvelopeError) Reason() string { return e.reason }

// The envelope decoding errors.
var (
	// ErrEnvelopeShort: fewer than EnvelopeHeaderSize bytes.
	ErrEnvelopeShort = &EnvelopeError{"short envelope"}
	// ErrEnvelopeLength: the length field disagrees with the bytes present.
	ErrEnvelopeLength = &EnvelopeError{"envelope length mismatch"}
	// ErrEnvelopeChecksum: the CRC-32C does not match.
	ErrEnvelopeChecksum = &EnvelopeError{"envelope checksum mismatch"}
)

// envBatchEnd is the top bit of the length field: set on the last entry of
// every AppendBatch (one write + one fsync). At start-up it tells a torn last
// batch (never fsynced, so never acknowledged, and after a power loss its
// pages may reach the disk in any order: a damaged entry can be followed by
// whole ones) from damage inside fsynced data: see scanWAL.
const envBatchEnd = 1 << 31

// maxEnvelopePayload is the largest payload the length field can carry
// beside the batch-end flag.
const maxEnvelopePayload = envBatchEnd - 1

// AppendEnvelope appends the envelope of (seq, payload) to dst and returns
// the extended slice. It does not allocate when cap(dst) is large enough.
// It panics if len(payload) does not fit in 31 bits (callers that take
// payloads from outside check MaxPayloadSize first, as AppendBatch does).
func AppendEnvelope(dst []byte, seq uint64, payload []byte) []byte {
	return appendEnvelope(dst, seq, payload, false)
}

// AppendEnvelopeBatchEnd is AppendEnvelope for the last entry of a batch.
func AppendEnvelopeBatchEnd(dst []byte, seq uint64, payload []byte) []byte {
	return appendEnvelope(dst, seq, payload, true)
}

func appendEnvelope(dst []byte, seq uint64, payload []byte, batchEnd bool) []byte {
	if uint64(len(payload)) > maxEnvelopePayload {
		panic("journal: envelope payload larger than 2 GiB")
	}
	n := uint32(len(payload))
	if batchEnd {
		n |= envBatchEnd
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, n)
	sum := crc32.Update(0, castagnoli, dst[start:start+12])
	sum = crc32.Update(sum, castagnoli, payload)
	dst = binary.LittleEndian.AppendUint32(dst, sum)
	return append(dst, payload...)
}

// EnvelopeSize returns the encoded size of an envelope around n payload bytes.
func EnvelopeSize(n int) int { return EnvelopeHeaderSize + n }

// DecodeEnvelope validates b as exactly one envelope and returns its seq and
// payload. The payload is a sub-slice of b (no copy). The length field must
// match len(b) exactly and the checksum must verify; otherwise the error is
// one of ErrEnvelopeShort, ErrEnvelopeLength or ErrEnvelopeChecksum (all
// *EnvelopeError, all matching ErrCorrupt). DecodeEnvelope never allocates.
func DecodeEnvelope(b []byte) (seq uint64, payload []byte, err error) {
	if len(b) < EnvelopeHeaderSize {
		return 0, nil, ErrEnvelopeShort
	}
	n := binary.LittleEndian.Uint32(b[8:12]) &^ envBatchEnd
	if uint64(n) != uint64(len(b)-EnvelopeHeaderSize) {
		return 0, nil, ErrEnvelopeLength
	}
	sum := crc32.Update(0, castagnoli, b[:12])
	sum = crc32.Update(sum, castagnoli, b[EnvelopeHeaderSize:])
	if sum != binary.LittleEndian.Uint32(b[12:16]) {
		return 0, nil, ErrEnvelopeChecksum
	}
	return binary.LittleEndian.Uint64(b[:8]), b[EnvelopeHeaderSize:], nil
}

// EnvelopeEndsBatch reports whether the (valid) envelope b is the last entry
// of its batch.
func EnvelopeEndsBatch(b []byte) bool {
	return len(b) >= EnvelopeHeaderSize && binary.LittleEndian.Uint32(b[8:12])&envBatchEnd != 0
}
