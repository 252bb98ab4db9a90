package replication

// The record format: KindCommands bodies are compressed (version 2), a log
// written before compression (version 1) stays readable, and a corrupt or
// hostile compressed body is an error, never a panic or a large allocation.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/ubscore/ubscore/core"
)

// appendCommandsV1 is the KindCommands body as written before compression.
func appendCommandsV1(dst []byte, epoch uint64, first core.Seq, cmds [][]byte) []byte {
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

// orders is n encoded limit orders from seq first, of a seeded random mix
// of users, markets, prices near the mid and sizes in lots, their times
// a few µs apart (the benchmark's kind of traffic, with a real clock).
func orders(seed uint64, first core.Seq, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]byte, n)
	t := int64(1_790_000_000_000_000_000)
	for i := range out {
		t += rng.Int64N(5000)
		c := core.Command{Seq: first + core.Seq(i), Time: t, Kind: core.KindPlaceOrder,
			Side: core.Side(1 + rng.IntN(2)), Type: core.OrderType(1), TIF: core.TimeInForce(1),
			User: core.UserID(1 + rng.IntN(10_000)), Market: core.MarketID(1 + rng.IntN(4)),
			Price: core.Price(50_000_000_000 + 10_000*(rng.Int64N(40)-20)), Qty: core.Units(100_000 * (1 + rng.Int64N(200)))}
		out[i] = core.EncodeCommand(nil, &c)
	}
	return out
}

func sameCommands(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d commands, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("command %d: %x, want %x", i, got[i], want[i])
		}
	}
}

// TestRecordCompressed: a group commit's commands round-trip through a
// version-2 record, which is well under the size of the same commands in
// the clear (the point of it: the NATS nodes' work goes with the bytes).
func TestRecordCompressed(t *testing.T) {
	cmds := orders(1, 1001, 3000)
	body := AppendCommands(nil, 7, 1001, cmds)
	if body[0] != recordVersionS2 {
		t.Fatalf("version %d, want %d", body[0], recordVersionS2)
	}
	clear := appendCommandsV1(nil, 7, 1001, cmds)
	t.Logf("%d bytes in the clear, %d compressed", len(clear), len(body))
	if ratio := float64(len(clear)) / float64(len(body)); ratio < 1.3 {
		t.Fatalf("compressed %d bytes to %d (%.2fx): not compressed", len(clear), len(body), ratio)
	}
	r, err := DecodeRecord(body)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindCommands || r.Epoch != 7 || r.Seq != 1001 || r.Last() != 4000 {
		t.Fatalf("record %+v", r)
	}
	sameCommands(t, r.Commands, cmds)
	// One command, an empty one, the largest one.
	for _, cs := range [][][]byte{{[]byte("a")}, {{}}, {bytes.Repeat([]byte{9}, core.MaxCommandSize)}} {
		r, err := DecodeRecord(AppendCommands(nil, 1, 5, cs))
		if err != nil || r.Seq != 5 {
			t.Fatalf("%d-byte command: %+v %v", len(cs[0]), r, err)
		}
		sameCommands(t, r.Commands, cs)
	}
	// The encoder's buffers are reused: a second record does not see the first.
	var enc commandsEncoder
	enc.append(nil, 1, 1, cmds)
	small := enc.append(nil, 1, 9, [][]byte{[]byte("z")})
	if r, err := DecodeRecord(small); err != nil || len(r.Commands) != 1 || string(r.Commands[0]) != "z" {
		t.Fatalf("second record: %+v %v", r, err)
	}
}

// v1Record is a version-1 KindCommands record (epoch 3, commands 41..43:
// "a", "", "xyz") as the writer wrote it before compression.
const v1Record = "0143032903016100037879 7a"

// TestRecordVersion1: a log written before compression reads as before.
func TestRecordVersion1(t *testing.T) {
	b, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(v1Record), []byte(" "), nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("a"), {}, []byte("xyz")}
	if !bytes.Equal(b, appendCommandsV1(nil, 3, 41, want)) {
		t.Fatalf("the version-1 fixture is not the version-1 layout")
	}
	r, err := DecodeRecord(b)
	if err != nil || r.Kind != KindCommands || r.Epoch != 3 || r.Seq != 41 || r.Last() != 43 {
		t.Fatalf("%+v %v", r, err)
	}
	sameCommands(t, r.Commands, want)
	cmds := orders(2, 1, 500)
	r, err = DecodeRecord(appendCommandsV1(nil, 2, 1, cmds))
	if err != nil {
		t.Fatal(err)
	}
	sameCommands(t, r.Commands, cmds)
}

// s2Body is a version-2 KindCommands body of count commands whose s2 block
// holds part (any bytes).
func s2Body(count uint64, part []byte) []byte {
	b := []byte{recordVersionS2, byte(KindCommands), 1, 1}
	b = binary.AppendUvarint(b, count)
	return append(b, s2.Encode(nil, part)...)
}

// TestRecordCompressedCorrupt: a damaged or hostile compressed body is
// ErrRecord; one that claims more than maxCommandsPart decoded is refused
// before it is decoded (no allocation of its size).
func TestRecordCompressedCorrupt(t *testing.T) {
	cmds := orders(3, 1, 200)
	good := AppendCommands(nil, 1, 1, cmds)
	bomb := s2Body(1, make([]byte, maxCommandsPart+1)) // a few hundred bytes claiming 1 MB + 1
	cases := map[string][]byte{
		"truncated":        good[:len(good)-1],
		"trailing":         append(append([]byte(nil), good...), 0),
		"no block":         {recordVersionS2, byte(KindCommands), 1, 1, 1},
		"bad block length": {recordVersionS2, byte(KindCommands), 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"over the limit":   bomb,
		"fewer bytes":      s2Body(3, []byte{0, 0}),                   // 3 commands cannot fit in 2 bytes
		"count off":        s2Body(2, []byte{1, 'a', 1, 'b', 1, 'c'}), // trailing bytes in the part
		"short part":       s2Body(2, []byte{1, 'a', 5, 'b'}),         // a length beyond the part
		"command size":     s2Body(1, binary.AppendUvarint(nil, core.MaxCommandSize+1)),
		"epoch version 2":  append([]byte{recordVersionS2}, appendEpoch(nil, 1, 1, "n", "v")[1:]...),
		"hash version 2":   append([]byte{recordVersionS2}, appendHash(nil, 1, 1, 1, "h")[1:]...),
		"seq 0":            AppendCommands(nil, 1, 0, cmds[:1]),
		"version 3":        append([]byte{3}, good[1:]...),
	}
	// A flipped byte in the block: an error, or (s2 has no checksum: a
	// literal byte changed) as many commands, which the standby decodes
	// one by one (core.DecodeCommand, and its seq checked). Never a panic.
	for i := 5; i < len(good); i += 7 {
		b := append([]byte(nil), good...)
		b[i] ^= 0x5a
		if r, err := DecodeRecord(b); err == nil && len(r.Commands) != len(cmds) {
			t.Fatalf("byte %d flipped: %d commands, want %d", i, len(r.Commands), len(cmds))
		}
	}
	for name, b := range cases {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: err = %v, want ErrRecord", name, err)
		}
	}
	if len(bomb) > 1<<16 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 10 {
		DecodeRecord(bomb) //nolint:errcheck // refused above
	}
	runtime.ReadMemStats(&m1)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("10 refused bombs allocated %d bytes", alloc)
	}
}

// TestAppendSplits: Append's records stay within the bounds DecodeRecord
// holds them to (count, decoded part) and the server's max payload.
func TestAppendSplits(t *testing.T) {
	l := &Log{maxMsg: 1<<20 - headroom}
	tiny := make([][]byte, maxCommandsCount+10)
	for i := range tiny {
		tiny[i] = []byte{byte(i)}
	}
	if n := l.fits(tiny); n != maxCommandsCount {
		t.Fatalf("%d one-byte commands in a record, want %d", n, maxCommandsCount)
	}
	big := make([][]byte, 5000)
	for i := range big {
		big[i] = bytes.Repeat([]byte{byte(i)}, 400)
	}
	n := l.fits(big)
	if part := commandsPart(big[:n]); n < 2000 || part > maxCommandsPart ||
		len(AppendCommands(nil, 1, 1, big[:n])) > l.maxMsg || commandsPart(big[:n+1]) <= maxCommandsPart &&
		commandsOverhead+s2.MaxEncodedLen(commandsPart(big[:n+1])) <= l.maxMsg {
		t.Fatalf("%d 400-byte commands in a record (%d bytes)", n, part)
	}
	small := &Log{maxMsg: 4096}
	if n := small.fits(big); n < 5 || len(AppendCommands(nil, 1, 1, big[:n])) > small.maxMsg {
		t.Fatalf("%d 400-byte commands in a 4 KB record", n)
	}
	if n := small.fits([][]byte{make([]byte, 8000), {1}}); n != 1 {
		t.Fatalf("a command over the max payload: %d in its record, want 1 (the server refuses it)", n)
	}
}
