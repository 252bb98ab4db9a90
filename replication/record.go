package replication

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ubscore/ubscore/core"
)

// Kind is what one message of the replicated log holds.
type Kind uint8

const (
	// KindCommands: a run of consecutive sequenced commands (part of one
	// group commit), each the WAL's payload (core.EncodeCommand).
	KindCommands Kind = 'C'
	// KindEpoch: a node became the log's writer. Every command after it, up
	// to the next epoch marker, was appended by that node.
	KindEpoch Kind = 'E'
	// KindHash: the writer's state hash after command Seq; a follower that
	// reaches Seq compares its own and halts on a mismatch.
	KindHash Kind = 'H'
)

func (k Kind) String() string {
	switch k {
	case KindCommands:
		return "commands"
	case KindEpoch:
		return "epoch"
	case KindHash:
		return "hash"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// recordVersion is the first byte of every message body.
const recordVersion = 1

// maxHashLen bounds a KindHash record's hash (core's is 64 hex digits).
const maxHashLen = 128

// maxNodeLen bounds an epoch marker's node name.
const maxNodeLen = 256

// Record is one message of the replicated log, decoded.
//
// Body layout (all integers unsigned varints):
//
//	version(=1) kind epoch
//	  C: first count, then count x (len, bytes): commands first..first+count-1
//	  E: last (the last command before the epoch), len, node name, len, venue
//	  H: seq, at (the log's last command before it), len, hash
type Record struct {
	Kind  Kind
	Epoch uint64 // the writer's epoch (every kind)
	// KindCommands: the seq of Commands[0]; the others follow one by one.
	// KindEpoch: the last command of the log before this epoch.
	// KindHash: the command after which Hash was computed.
	Seq      core.Seq
	Commands [][]byte // KindCommands only; aliases the decoded body
	Node     string   // KindEpoch only
	Venue    string   // KindEpoch only: the venue's identity (its WAL id), shared by every node of it
	Hash     string   // KindHash only
	At       core.Seq // KindHash only: the log's last command before this record
}

// Last is the log's last command once this record is read: the last
// command the record holds (KindCommands), the last before it (KindEpoch:
// Seq; KindHash: At). It never decreases along the log (Seek relies on it).
func (r *Record) Last() core.Seq {
	switch {
	case r.Kind == KindCommands && len(r.Commands) > 0:
		return r.Seq + core.Seq(len(r.Commands)) - 1
	case r.Kind == KindHash:
		return r.At
	}
	return r.Seq
}

// ErrRecord is returned for a message body that is not a valid record, and
// for a record a follower cannot apply where the log holds it (a gap
// before it, a command at another seq than its place).
var ErrRecord = errors.New("replication: invalid record")

// AppendCommands appends the body of a KindCommands record to dst.
func AppendCommands(dst []byte, epoch uint64, first core.Seq, cmds [][]byte) []byte {
	dst = append(dst, recordVersion, byte(KindCommands))
	dst = binary.AppendUvarint(dst, epoch)
	dst = binary.AppendUvarint(dst, uint64(first))
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for _, c := range cmds {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

// commandsOverhead is an upper bound of a KindCommands body's bytes beyond
// its commands: the header plus one length per command (see split).
const commandsOverhead = 2 + 3*binary.MaxVarintLen64

// appendEpoch appends the body of a KindEpoch record to dst.
func appendEpoch(dst []byte, epoch uint64, last core.Seq, node, venue string) []byte {
	dst = append(dst, recordVersion, byte(KindEpoch))
	dst = binary.AppendUvarint(dst, epoch)
	dst = binary.AppendUvarint(dst, uint64(last))
	dst = binary.AppendUvarint(dst, uint64(len(node)))
	dst = append(dst, node...)
	dst = binary.AppendUvarint(dst, uint64(len(venue)))
	return append(dst, venue...)
}

// appendHash appends the body of a KindHash record to dst.
func appendHash(dst []byte, epoch uint64, seq, at core.Seq, hash string) []byte {
	dst = append(dst, recordVersion, byte(KindHash))
	dst = binary.AppendUvarint(dst, epoch)
	dst = binary.AppendUvarint(dst, uint64(seq))
	dst = binary.AppendUvarint(dst, uint64(at))
	dst = binary.AppendUvarint(dst, uint64(len(hash)))
	return append(dst, hash...)
}

// DecodeRecord decodes a message body. Commands alias b.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	d := decoder{b: b}
	if v := d.byte(); v != recordVersion {
		return r, fmt.Errorf("%w: version %d", ErrRecord, v)
	}
	r.Kind = Kind(d.byte())
	r.Epoch = d.uv()
	r.Seq = core.Seq(d.uv())
	switch r.Kind {
	case KindCommands:
		n := d.uv()
		if r.Seq == 0 || n == 0 || n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: commands from %d, count %d", ErrRecord, r.Seq, n)
		}
		r.Commands = make([][]byte, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			r.Commands = append(r.Commands, d.bytes(core.MaxCommandSize))
		}
	case KindEpoch:
		r.Node = string(d.bytes(maxNodeLen))
		r.Venue = string(d.bytes(maxNodeLen))
	case KindHash:
		r.At = core.Seq(d.uv())
		r.Hash = string(d.bytes(maxHashLen))
		if r.Seq == 0 || r.Hash == "" || r.At < r.Seq {
			d.fail("hash record")
		}
	default:
		return Record{}, fmt.Errorf("%w: kind %d", ErrRecord, r.Kind)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return Record{}, d.err
	}
	return r, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrRecord, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uv() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(max int) []byte {
	n := d.uv()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("length %d", n))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
