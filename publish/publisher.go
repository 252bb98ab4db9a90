// Package publish is the event publisher: a follower of the durable WAL
// (like the Postgres sink) that publishes the core's events to the NATS
// JetStream stream UBS_EVENTS (events.go: subjects and payloads). It never
// blocks the core: it reads the WAL on its own goroutine through a
// journal.Follower, and a NATS outage only makes it lag (the WAL it still
// needs is kept under the --follower-max-retained rule).
//
// Exactly once into the stream, across crashes and restarts:
//
//   - every message has the id "<seq>-<event index>" (Nats-Msg-Id);
//   - on start (and after any error) the publisher reads the stream's last
//     message and resumes right after it: the next event of that command,
//     or the next command;
//   - every publish carries Nats-Expected-Last-Sequence = the stream
//     sequence of the message before it, so the stream can never get a hole
//     (a later message stored after an earlier one failed): the server
//     refuses it, the publisher resumes from what is stored;
//   - JetStream's duplicate window (the message ids) drops a message sent
//     twice within it (a publish whose ack was lost, then retried);
//   - only the last message of a batch asks for an ack: by the chain of
//     expected sequences its success means the whole batch is stored
//     (send).
//
// The publisher assumes it is the stream's only writer, and that the stream
// keeps its last message (it is created without limits: a retention set by
// hand must keep at least the newest message).
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
)

// Stream is the JetStream stream the publisher writes.
const Stream = "UBS_EVENTS"

// Limits and timing.
const (
	// MaxBatch is how many commands one round of publishing reads from the WAL.
	MaxBatch = 1024
	// MaxPending bounds the publishes awaiting their ack.
	MaxPending = 16_384
	// DuplicateWindow is the stream's duplicate window (message ids).
	DuplicateWindow = 10 * time.Minute
	ackTimeout      = 10 * time.Second
)

// WAL is where the publisher reads the durable stream (journal.Pipeline).
type WAL interface {
	NewFollower(from core.Seq) (*journal.Follower, error)
	DurableSeq() core.Seq
}

// Publisher publishes the WAL's events to JetStream. Create it with New;
// Run it on one goroutine.
type Publisher struct {
	url string
	log *slog.Logger
	// Stream and Prefix name the stream and its subjects (default Stream
	// and SubjectPrefix; tests use their own). Set them before Run.
	Stream, Prefix string

	published atomic.Uint64 // checkpoint: every event of every seq <= it is in the stream (0 = not known yet)
	lastTime  atomic.Int64  // unix ns of the last command published
	messages  atomic.Uint64 // messages stored (acked, not duplicates)
	errors    atomic.Uint64 // publish failures (each one restarts from the stream's state)
	gaps      atomic.Uint64 // commands the WAL no longer had (released past the checkpoint)
}

// New returns a publisher for the NATS server at url.
func New(url string, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{url: url, log: log, Stream: Stream, Prefix: SubjectPrefix}
}

// Checkpoint is the last seq all of whose events are in the stream (the
// follower's checkpoint for journal.Retention; 0 until the first resume).
func (p *Publisher) Checkpoint() core.Seq { return core.Seq(p.published.Load()) }

// Stats is what the metrics show.
type Stats struct {
	Checkpoint core.Seq
	LastTime   int64 // unix ns of the last command published (0 = none)
	Messages   uint64
	Errors     uint64
	Gaps       uint64
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	return Stats{Checkpoint: p.Checkpoint(), LastTime: p.lastTime.Load(), Messages: p.messages.Load(),
		Errors: p.errors.Load(), Gaps: p.gaps.Load()}
}

// Run publishes until ctx ends: connect, make sure the stream exists,
// resume after its last message, follow the WAL; after any failure it
// starts over from the stream's state, with backoff.
func (p *Publisher) Run(ctx context.Context, wal WAL) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.session(ctx, wal, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil || errors.Is(err, journal.ErrStopped) {
			return
		}
		p.errors.Add(1)
		p.log.Warn("publish: stopped; resuming from the stream's last message", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session is one connection's life: resume, then publish batches.
func (p *Publisher) session(ctx context.Context, wal WAL, healthy func()) error {
	nc, err := nats.Connect(p.url, nats.Name("ubscore-publisher"), nats.MaxReconnects(-1), nats.Timeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("publish: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(MaxPending), jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return err
	}
	s, err := EnsureStream(ctx, js, p.Stream, p.Prefix)
	if err != nil {
		return err
	}
	from, skip, last, err := resumePoint(ctx, s)
	if err != nil {
		return err
	}
	if d := wal.DurableSeq(); from > d+1 {
		logging.Critical(ctx, p.log, "publish: the stream is ahead of this WAL (written from another data dir?); publishing nothing",
			"stream_next_seq", from, "durable_seq", d)
		<-ctx.Done()
		return ctx.Err()
	}
	p.published.Store(uint64(from - 1))
	f, err := wal.NewFollower(from)
	var gone *journal.HistoryGoneError
	if errors.As(err, &gone) {
		logging.Critical(ctx, p.log, "publish: events before the earliest retained seq cannot be published (the WAL was released past the publisher's checkpoint)",
			"from", from, "earliest", gone.Earliest)
		p.gaps.Add(uint64(gone.Earliest - from))
		from, skip = gone.Earliest, -1
		p.published.Store(uint64(from - 1))
		f, err = wal.NewFollower(from)
	}
	if err != nil {
		return err
	}
	p.log.Info("publish: following the WAL", "from_seq", from, "stream_last_seq", last)
	// Publishing is pipelined: this goroutine reads the WAL and sends each
	// batch's messages without waiting; the acker takes the batches in
	// order, waits for each one's ack and only then moves the checkpoint. A
	// failed publish cancels the session (every later message fails too:
	// each expects the sequence before it), which resumes from the stream.
	sctx, cancel := context.WithCancelCause(ctx)
	acks := make(chan ackBatch, MaxInflightBatches)
	ackDone := make(chan struct{})
	go p.acker(sctx, cancel, acks, ackDone, healthy)
	defer func() { cancel(nil); close(acks); <-ackDone }()
	var msgs []message
	var buf []byte      // the batch's payloads, reused: send copies what outlives it
	var seqs []core.Seq // the command of each message
	subs := newSubjects(p.Prefix)
	for {
		recs, err := f.Next(sctx, MaxBatch)
		if err != nil {
			if c := context.Cause(sctx); c != nil && ctx.Err() == nil {
				return c
			}
			return err
		}
		msgs = msgs[:0]
		buf = buf[:0]
		seqs = seqs[:0]
		names := f.Processor()
		for i := range recs {
			r := &recs[i]
			n := len(msgs)
			msgs, buf = appendMessages(msgs, buf, subs, r.Events, names)
			if r.Cmd.Seq == from && skip >= 0 { // the command the stream ends inside: after its last stored event
				k := n
				for k < len(msgs) && msgs[k].idx <= skip {
					k++
				}
				msgs = append(msgs[:n], msgs[k:]...)
			}
			for range len(msgs) - n {
				seqs = append(seqs, r.Cmd.Seq)
			}
		}
		b := ackBatch{n: len(msgs), endSeq: recs[len(recs)-1].Cmd.Seq, endTime: recs[len(recs)-1].Cmd.Time}
		if b.fut, last, err = p.send(nc, js, msgs, seqs, last); err != nil {
			return err
		}
		select {
		case acks <- b:
		case <-sctx.Done():
			if c := context.Cause(sctx); c != nil && ctx.Err() == nil {
				return c
			}
			return ctx.Err()
		}
	}
}

// MaxInflightBatches bounds the batches sent and not yet acknowledged.
const MaxInflightBatches = 8

// ackBatch is one batch's publishes awaiting the ack of its last message.
type ackBatch struct {
	fut     jetstream.PubAckFuture // the last message's (nil: the batch had no messages)
	n       int                    // messages in the batch
	endSeq  core.Seq               // the batch's last command: published once every ack is in
	endTime int64
}

// acker waits for each batch's ack in order and moves the checkpoint; the
// first failure cancels the session with it.
func (p *Publisher) acker(ctx context.Context, cancel context.CancelCauseFunc, acks <-chan ackBatch, done chan<- struct{}, healthy func()) {
	defer close(done)
	for b := range acks {
		if fut := b.fut; fut != nil {
			select {
			case ack := <-fut.Ok():
				if !ack.Duplicate {
					p.messages.Add(uint64(b.n))
				}
			case err := <-fut.Err():
				cancel(fmt.Errorf("publish: %s: %w", fut.Msg().Header.Get(jetstream.MsgIDHeader), err))
				for range acks { // drain: the sender stops at the cancel
				}
				return
			case <-ctx.Done():
				for range acks {
				}
				return
			}
		}
		p.published.Store(uint64(b.endSeq))
		p.lastTime.Store(b.endTime)
		healthy()
	}
}

// send publishes msgs in order, each expecting the stream's last sequence
// to be the one before it (Nats-Expected-Last-Sequence), and asks for an
// ack of the batch's last message only; it returns that ack's future (nil
// for an empty batch) and the stream's last sequence once they are stored.
//
// One ack per batch is enough: the server stores a message only if the
// stream's last sequence is the one it expects, so a message refused or
// lost anywhere in the batch makes every later one fail its expectation,
// the last one included, whose ack then carries the error (or never
// comes: the ack times out); either way the session starts over from the
// stream's last stored message. An ack of the last message therefore
// means the whole batch is stored, in order. (Acking every message cost
// the exchange ~7 µs and the NATS server ~5 µs more per message: an ack
// message each way, a future, a JSON decode.) The unacked messages are
// plain publishes on the same connection, so the server reads them in
// order before the acked one.
func (p *Publisher) send(nc *nats.Conn, js jetstream.JetStream, msgs []message, seqs []core.Seq, last uint64) (jetstream.PubAckFuture, uint64, error) {
	if len(msgs) == 0 {
		return nil, last, nil
	}
	n := len(msgs) - 1
	// One Msg for the unacked ones: PublishMsg encodes it before it returns.
	id, expect := []string{""}, []string{""}
	nm := &nats.Msg{Header: nats.Header{jetstream.MsgIDHeader: id, jetstream.ExpectedLastSeqHeader: expect}}
	for i := range msgs[:n] {
		m := &msgs[i]
		nm.Subject, nm.Data = m.subject, m.data
		id[0], expect[0] = MsgID(seqs[i], m.idx), strconv.FormatUint(last+uint64(i), 10)
		if err := nc.PublishMsg(nm); err != nil {
			return nil, last, fmt.Errorf("publish: %s: %w", MsgID(seqs[i], m.idx), err)
		}
	}
	// The batch's last message is kept by the client until its ack (it may
	// resend it), past this batch: it gets its own copy of the payload. The
	// others were copied into the connection's buffer by PublishMsg.
	m := &msgs[n]
	data := append([]byte(nil), m.data...)
	fut, err := js.PublishMsgAsync(&nats.Msg{Subject: m.subject, Data: data}, jetstream.WithMsgID(MsgID(seqs[n], m.idx)),
		jetstream.WithExpectLastSequence(last+uint64(n)))
	if err != nil {
		return nil, last, fmt.Errorf("publish: %s: %w", MsgID(seqs[n], m.idx), err)
	}
	return fut, last + uint64(len(msgs)), nil
}

// EnsureStream creates the stream name over the subjects prefix+">" (or
// updates its config) and returns it.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name, prefix string) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{prefix + ">"},
		Storage:    jetstream.FileStorage,
		Duplicates: DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("publish: stream %s: %w", name, err)
	}
	return s, nil
}

// resumePoint reads the stream's last message: the publisher continues at
// command from, skipping its events up to index skip (-1: none stored yet),
// and the stream's last sequence is last.
func resumePoint(ctx context.Context, s jetstream.Stream) (from core.Seq, skip int, last uint64, err error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("publish: stream info: %w", err)
	}
	last = info.State.LastSeq
	if info.State.Msgs == 0 && last > 0 {
		// Purged or aged out: where the publisher was is unknown, and
		// starting over would publish everything again.
		return 0, 0, 0, fmt.Errorf("publish: stream %s is empty but has held %d messages (purged?): refusing to guess where to resume",
			info.Config.Name, last)
	}
	if info.State.Msgs == 0 {
		return 1, -1, last, nil
	}
	m, err := s.GetMsg(ctx, last)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("publish: read the stream's last message %d: %w", last, err)
	}
	seq, idx, ok := ParseMsgID(m.Header.Get(jetstream.MsgIDHeader))
	if !ok {
		return 0, 0, 0, fmt.Errorf("publish: the stream's last message %d has no valid id %q (another writer?)",
			last, m.Header.Get(jetstream.MsgIDHeader))
	}
	return seq, idx, last, nil
}
