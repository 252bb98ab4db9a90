package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/replication/natstest"
)

func TestRecordRoundTrip(t *testing.T) {
	cmds := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte{7}, 300)}
	r, err := DecodeRecord(AppendCommands(nil, 3, 41, cmds))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindCommands || r.Epoch != 3 || r.Seq != 41 || r.Last() != 43 || len(r.Commands) != 3 ||
		!bytes.Equal(r.Commands[2], cmds[2]) || len(r.Commands[1]) != 0 {
		t.Fatalf("commands: %+v", r)
	}
	r, err = DecodeRecord(appendEpoch(nil, 4, 43, "node-b", "v1"))
	if err != nil || r.Kind != KindEpoch || r.Epoch != 4 || r.Last() != 43 || r.Node != "node-b" || r.Venue != "v1" {
		t.Fatalf("epoch: %+v %v", r, err)
	}
	r, err = DecodeRecord(appendHash(nil, 4, 40, 43, "abcd"))
	if err != nil || r.Kind != KindHash || r.Seq != 40 || r.At != 43 || r.Last() != 43 || r.Hash != "abcd" {
		t.Fatalf("hash: %+v %v", r, err)
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"version":      {3, 'C', 1, 1, 1, 0},
		"kind":         {1, 'X', 1, 1},
		"no commands":  {1, 'C', 1, 1, 0},
		"seq 0":        {1, 'C', 1, 0, 1, 0},
		"short":        {1, 'C', 1, 1, 2, 0},
		"trailing":     append(appendCommandsV1(nil, 1, 1, cmds[:1]), 0),
		"hash at<seq":  appendHash(nil, 1, 5, 4, "x"),
		"hash empty":   appendHash(nil, 1, 5, 5, ""),
		"long length":  {1, 'E', 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge count":   {1, 'C', 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad varint":   {1, 'C', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"command size": appendCommandsV1(nil, 1, 1, [][]byte{make([]byte, core.MaxCommandSize+1)}),
	} {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: err = %v, want ErrRecord", name, err)
		}
	}
}

// FuzzDecodeRecord: DecodeRecord never panics, and a record it accepts
// encodes back to itself: the same bytes (version 1, one encoding each), or
// (version 2, whose s2 block has many encodings) a body that decodes to
// the same record, within maxCommandsPart.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendCommands(nil, 1, 1, [][]byte{[]byte("x"), []byte("yz")}))
	f.Add(AppendCommands(nil, 1, 1, orders(1, 1, 40)))
	f.Add(appendCommandsV1(nil, 1, 1, [][]byte{[]byte("x"), []byte("yz")}))
	f.Add(appendCommandsV1(nil, 1, 1, orders(1, 1, 10)))
	f.Add(s2Body(1, make([]byte, maxCommandsPart+1)))
	f.Add(s2Body(2, []byte{1, 'a', 1, 'b', 1}))
	f.Add(appendEpoch(nil, 2, 9, "n", "v"))
	f.Add(appendHash(nil, 2, 9, 9, "h"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		var again []byte
		switch r.Kind {
		case KindCommands:
			if b[0] == recordVersionS2 {
				if part := commandsPart(r.Commands); part > maxCommandsPart {
					t.Fatalf("%d commands decoded to %d bytes, over %d", len(r.Commands), part, maxCommandsPart)
				}
				back, err := DecodeRecord(AppendCommands(nil, r.Epoch, r.Seq, r.Commands))
				if err != nil || back.Epoch != r.Epoch || back.Seq != r.Seq {
					t.Fatalf("%x decodes to %+v, which encodes to %+v %v", b, r, back, err)
				}
				sameCommands(t, back.Commands, r.Commands)
				return
			}
			again = appendCommandsV1(nil, r.Epoch, r.Seq, r.Commands)
		case KindEpoch:
			again = appendEpoch(nil, r.Epoch, r.Seq, r.Node, r.Venue)
		case KindHash:
			again = appendHash(nil, r.Epoch, r.Seq, r.At, r.Hash)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, r, again)
		}
	})
}

// cmdsFrom makes n fake WAL payloads for commands first.., of size bytes each.
func cmdsFrom(first core.Seq, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := bytes.Repeat([]byte{byte(i)}, size)
		out[i] = append([]byte(fmt.Sprintf("cmd-%d:", first+core.Seq(i))), b...)
	}
	return out
}

func open(t *testing.T, url, node string, replicas int) *Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := Open(ctx, Config{URL: url, Node: node, Replicas: replicas, Attempt: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func appendWait(t *testing.T, l *Log, first core.Seq, cmds [][]byte) error {
	t.Helper()
	if err := l.Append(first, cmds); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return l.Wait(ctx)
}

// readAll follows the log from stream sequence 1 until it has read to last.
func readAll(t *testing.T, l *Log, last uint64) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []Record
	stop := errors.New("done")
	err := l.Follow(ctx, 1, func(sq uint64, r Record) error {
		r.Commands = append([][]byte(nil), r.Commands...)
		out = append(out, r)
		if sq == last {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("follow: %v (read %d records)", err, len(out))
	}
	return out
}

// TestAppendFollowSeek: the writer's batches come back in order, a batch
// over the max payload is split in several records, and Seek finds the
// record of any command.
func TestAppendFollowSeek(t *testing.T) {
	c := natstest.Start(t, 1)
	w := open(t, c.URL(), "a", 1)
	if err := appendWait(t, w, 1, cmdsFrom(1, 1, 10)); !errors.Is(err, ErrNotWriter) {
		t.Fatalf("append before claim: %v", err)
	}
	if err := w.Claim(context.Background(), 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	seq := core.Seq(1)
	var want [][]byte
	for _, b := range []struct{ n, size int }{{3, 20}, {1, 5}, {3000, 400}, {7, 100}} { // 3000 x ~400 B: split
		cmds := cmdsFrom(seq, b.n, b.size)
		if err := appendWait(t, w, seq, cmds); err != nil {
			t.Fatal(err)
		}
		want = append(want, cmds...)
		seq += core.Seq(b.n)
	}
	if err := w.AppendHash(seq, "h"); err == nil {
		t.Fatal("a hash after a command not in the log was accepted")
	}
	if err := w.AppendHash(seq-1, "cafe"); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.Appended() != seq-1 {
		t.Fatalf("Appended = %d, want %d", w.Appended(), seq-1)
	}
	last, tail, err := w.Tail(context.Background())
	if err != nil || tail == nil || tail.Kind != KindHash || tail.Hash != "cafe" || tail.Seq != seq-1 {
		t.Fatalf("tail: %d %+v %v", last, tail, err)
	}
	recs := readAll(t, w, last)
	if recs[0].Kind != KindEpoch || recs[0].Epoch != 1 || recs[0].Node != "a" {
		t.Fatalf("first record %+v, want the epoch marker", recs[0])
	}
	var got [][]byte
	split := 0
	for _, r := range recs[1 : len(recs)-1] {
		if r.Kind != KindCommands || r.Seq != core.Seq(len(got)+1) {
			t.Fatalf("record %+v out of order after %d commands", r.Kind, len(got))
		}
		got = append(got, r.Commands...)
		split++
	}
	if split <= 4 {
		t.Fatalf("%d command records for 4 batches: the 1.2 MB batch was not split", split)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d commands, appended %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("command %d differs", i+1)
		}
	}
	var probes []core.Seq // each command record's first, middle and last command
	for _, r := range recs {
		if r.Kind == KindCommands {
			probes = append(probes, r.Seq, (r.Seq+r.Last())/2, r.Last())
		}
	}
	for _, s := range probes {
		sq, err := w.Seek(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[sq-1]
		if r.Kind != KindCommands || s < r.Seq || s > r.Last() {
			t.Fatalf("Seek(%d) = %d: %+v", s, sq, r.Kind)
		}
	}
	if sq, err := w.Seek(context.Background(), seq); err != nil || sq != last+1 {
		t.Fatalf("Seek past the end = %d, %v; want %d", sq, err, last+1)
	}
}

// TestFencedByPromotion: once another node claims the log, the old writer's
// next append is refused, it stays fenced, and nothing of it follows the
// new epoch marker in the log.
func TestFencedByPromotion(t *testing.T) {
	c := natstest.Start(t, 1)
	a := open(t, c.URL(), "a", 1)
	b := open(t, c.URL(), "b", 1)
	ctx := context.Background()
	if err := a.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := appendWait(t, a, 1, cmdsFrom(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	// b read up to stream sequence 1 only: its claim is behind.
	if err := b.Claim(ctx, 1, 0, 2); !errors.Is(err, ErrBehind) {
		t.Fatalf("stale claim: %v, want ErrBehind", err)
	}
	last, tail, err := b.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, last, tail.Last(), 2); err != nil {
		t.Fatal(err)
	}
	err = appendWait(t, a, 6, cmdsFrom(6, 2, 10))
	if !errors.Is(err, ErrFenced) || !a.Fenced() || a.Refused() != 1 {
		t.Fatalf("old writer's append: %v (fenced %v)", err, a.Fenced())
	}
	if err := a.Append(6, cmdsFrom(6, 1, 1)); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced is not sticky: %v", err)
	}
	if a.Appended() != 5 {
		t.Fatalf("old writer Appended = %d, want 5", a.Appended())
	}
	if err := appendWait(t, b, 6, cmdsFrom(6, 3, 10)); err != nil {
		t.Fatal(err)
	}
	last, _, _ = b.Tail(ctx)
	recs := readAll(t, b, last)
	if len(recs) != 4 || recs[2].Kind != KindEpoch || recs[2].Node != "b" || recs[3].Epoch != 2 || recs[3].Seq != 6 {
		t.Fatalf("log after the promotion: %d records %+v", len(recs), recs)
	}
}

// TestQuorum: on a 3-node cluster (R=3) the writer goes on with one node
// down; with two down an append is not confirmed (and not fenced), and
// once a node is back the same Wait completes and the batch is in the log
// once.
func TestQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster")
	}
	c := natstest.Start(t, 3)
	w := open(t, c.URL(), "a", 3)
	ctx := context.Background()
	if err := w.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	seq := core.Seq(1)
	step := func() error {
		err := appendWait(t, w, seq, cmdsFrom(seq, 10, 50))
		if err == nil {
			seq += 10
		}
		return err
	}
	if err := step(); err != nil {
		t.Fatal(err)
	}
	c.StopNode(2)
	for i := 0; i < 3; i++ {
		if err := step(); err != nil {
			t.Fatalf("one node down: %v", err)
		}
	}
	c.StopNode(1)
	if err := w.Append(seq, cmdsFrom(seq, 10, 50)); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := w.Wait(short)
	cancel()
	if err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("two nodes down: Wait = %v, want unconfirmed", err)
	}
	if err := c.StartNode(1); err != nil {
		t.Fatal(err)
	}
	long, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = w.Wait(long) // the same batch, retried until a quorum stores it
	cancel()
	if err != nil {
		t.Fatalf("quorum back: %v", err)
	}
	seq += 10
	if err := step(); err != nil {
		t.Fatal(err)
	}
	last, _, err := w.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := core.Seq(0)
	for _, r := range readAll(t, w, last)[1:] {
		if r.Kind != KindCommands || r.Seq != n+1 {
			t.Fatalf("record from %d after command %d", r.Seq, n)
		}
		n = r.Last()
	}
	if n != seq-1 {
		t.Fatalf("log holds commands 1..%d, want 1..%d", n, seq-1)
	}
}

// TestOpenConnectsToTheLeader: a Log opened with every node's URL ends on
// the node that leads the stream (its appends then cross no route), and
// appends as before; with the client's random pick of the first node, 4
// opens all land there without the move with probability 1/81.
func TestOpenConnectsToTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster")
	}
	c := natstest.Start(t, 3)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		l := open(t, c.URL(), fmt.Sprintf("n%d", i), 3)
		info, err := l.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			t.Fatalf("no stream leader: %+v", info.Cluster)
		}
		if got := l.nc.ConnectedServerName(); got != info.Cluster.Leader {
			t.Fatalf("open %d: connected to %s, the stream's leader is %s", i, got, info.Cluster.Leader)
		}
		if i == 0 {
			if err := l.Claim(ctx, 0, 0, 1); err != nil {
				t.Fatal(err)
			}
			if err := appendWait(t, l, 1, cmdsFrom(1, 10, 50)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAppendSkipsWhatTheLogHolds: a batch that begins with commands the
// log holds already (a promoted standby journaling, after its claim, what
// it applied from the log before it) appends only the rest; a batch past
// the next command (a gap) is refused and appends nothing.
func TestAppendSkipsWhatTheLogHolds(t *testing.T) {
	c := natstest.Start(t, 1)
	w := open(t, c.URL(), "a", 1)
	ctx := context.Background()
	if err := w.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := appendWait(t, w, 1, cmdsFrom(1, 10, 20)); err != nil {
		t.Fatal(err)
	}
	if err := appendWait(t, w, 4, cmdsFrom(4, 4, 20)); err != nil { // 4..7: all held
		t.Fatal(err)
	}
	if err := appendWait(t, w, 6, cmdsFrom(6, 9, 20)); err != nil { // 6..14: 11..14 are new
		t.Fatal(err)
	}
	if err := w.Append(16, cmdsFrom(16, 2, 20)); err == nil {
		t.Fatal("an append past the next command (15) was taken")
	}
	last, _, err := w.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, w, last)
	n := core.Seq(0)
	for _, r := range recs[1:] {
		if r.Kind != KindCommands || r.Seq != n+1 {
			t.Fatalf("a record from command %d after command %d", r.Seq, n)
		}
		for i, cmd := range r.Commands {
			if want := fmt.Sprintf("cmd-%d:", r.Seq+core.Seq(i)); !bytes.HasPrefix(cmd, []byte(want)) {
				t.Fatalf("command %d: %q, want %s...", r.Seq+core.Seq(i), cmd, want)
			}
		}
		n = r.Last()
	}
	if n != 14 || len(recs) != 3 || w.Appended() != 14 {
		t.Fatalf("the log holds commands 1..%d in %d records (appended %d), want 1..14 in 3", n, len(recs), w.Appended())
	}
}

// A record delivered again is skipped, not taken for a gap (a standby
// once stopped following on "stream sequence 769 after 769"); a record
// past the next one is a gap.
func TestFollowSkipsRedeliveries(t *testing.T) {
	for _, c := range []struct {
		sq, next uint64
		apply    bool
		gap      bool
	}{{769, 770, false, false}, {1, 770, false, false}, {770, 770, true, false}, {771, 770, false, true}} {
		apply, err := inOrder(c.sq, c.next)
		if apply != c.apply || (err != nil) != c.gap {
			t.Fatalf("inOrder(%d, %d) = %v, %v; want apply %v, gap %v", c.sq, c.next, apply, err, c.apply, c.gap)
		}
	}
}
