package publish

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
)

// TestBatchAckCoversTheBatch: only a batch's last message is acked, so its
// ack must fail whenever any earlier message of the batch was not stored.
// A middle message that the stream never stores (here: a subject outside
// it) breaks the chain of expected last sequences: every later message is
// refused, the last one's ack carries the error, and nothing after the hole
// is in the stream. A batch with no hole is acked and stored whole.
func TestBatchAckCoversTheBatch(t *testing.T) {
	url := natsURL(t)
	name, prefix := testStream(t, url)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := EnsureStream(ctx, js, name, prefix)
	if err != nil {
		t.Fatal(err)
	}
	p := New(url, quiet())
	batch := func(seq core.Seq, subjects ...string) ([]message, []core.Seq) {
		var msgs []message
		var seqs []core.Seq
		for i, sub := range subjects {
			msgs = append(msgs, message{subject: sub, idx: i, data: []byte(`{}`)})
			seqs = append(seqs, seq)
		}
		return msgs, seqs
	}
	wait := func(fut jetstream.PubAckFuture) (*jetstream.PubAck, error) {
		select {
		case a := <-fut.Ok():
			return a, nil
		case err := <-fut.Err():
			return nil, err
		case <-ctx.Done():
			t.Fatal("no ack")
			return nil, nil
		}
	}
	msgs, seqs := batch(1, prefix+"a", prefix+"b", prefix+"c")
	fut, last, err := p.send(nc, js, msgs, seqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := wait(fut); err != nil || a.Sequence != 3 || last != 3 {
		t.Fatalf("whole batch: ack %+v, err %v, last %d: want stream seq 3", a, err, last)
	}
	// Message 2 of 4 goes nowhere: 3 and 4 must be refused.
	msgs, seqs = batch(2, prefix+"d", "elsewhere."+prefix+"e", prefix+"f", prefix+"g")
	fut, _, err = p.send(nc, js, msgs, seqs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := wait(fut); err == nil {
		t.Fatalf("a batch with a hole was acked: %+v", a)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 4 || info.State.Msgs != 4 {
		t.Fatalf("stream holds %d messages up to %d: want 4 (the batch stops at its hole)", info.State.Msgs, info.State.LastSeq)
	}
	ids, _, _ := stored(t, url, name)
	sameList(t, "stored ids", ids, []string{"1-0", "1-1", "1-2", "2-0"})
	if f, l, err := p.send(nc, js, nil, nil, 4); f != nil || l != 4 || err != nil {
		t.Fatalf("empty batch: %v %d %v", f, l, err)
	}
}
