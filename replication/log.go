package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
)

// Defaults of Config.
const (
	DefaultStream  = "UBS_LOG"
	DefaultSubject = "ubs.log"
	// DefaultAttempt bounds one attempt of an append (publish to ack), after
	// which the outcome is read back from the stream.
	DefaultAttempt = 2 * time.Second
	// headroom is what a message's headers and the protocol may take of the
	// server's max payload.
	headroom = 1024
)

// Errors.
var (
	// ErrFenced: another node has appended to the log since this node's
	// last append (it was promoted): this node must acknowledge nothing more.
	// Sticky: every later Append of the Log returns it.
	ErrFenced = errors.New("replication: fenced: another node appended to the log")
	// ErrBehind: Claim named a stream sequence that is not the log's last:
	// read the log further and claim again.
	ErrBehind = errors.New("replication: the log holds records this node has not read")
	// ErrNotWriter: Append before a successful Claim.
	ErrNotWriter = errors.New("replication: this node has not claimed the log")
)

// Config configures a Log.
type Config struct {
	URL      string // NATS server URL(s), comma separated
	Stream   string // DefaultStream if empty
	Subject  string // DefaultSubject if empty
	Replicas int    // the stream's replicas: 3 on a cluster, 1 on a single server (1 if 0)
	Node     string // this node's name, written in its epoch markers
	// Venue is the venue's identity (its WAL id), written in its epoch
	// markers; every node of a venue shares it (Standby checks it).
	Venue string
	// Attempt bounds one append attempt; DefaultAttempt if 0.
	Attempt time.Duration
	// AnyNode keeps the connection on whichever node of URL the client
	// picked, instead of moving it to the node that leads the stream
	// (homeToLeader; for the benchmark's comparison).
	AnyNode bool
	Logger  *slog.Logger
}

// Log is the replicated sequenced-command log: a JetStream stream in which
// the writer (the primary) appends every group commit, each message
// expecting the stream's last sequence to be the one the writer appended
// before it (Nats-Expected-Last-Sequence). That expectation is the fence:
// once another node has appended (a promotion's epoch marker), every
// append of the old writer is refused and it learns it is fenced. No clock
// is involved.
//
// One goroutine appends (the journaler) and one waits (the pipeline's
// replication stage); Follow may run beside them.
type Log struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	maxMsg int             // bytes of one message's body
	enc    commandsEncoder // Append's buffers (one goroutine appends; not under mu)

	// The writer's state, guarded by mu (Append runs on the journaler,
	// WaitStored on the pipeline's replication stage).
	mu       sync.Mutex
	epoch    uint64   // 0 until Claim
	last     uint64   // the stream sequence of the last record known stored
	queue    []sent   // sent, not yet known stored, in order: queue[i] expects last+i
	sentUpTo core.Seq // the last command appended (stored or queued)
	enqueued uint64   // records appended since Open
	sentB    uint64   // bytes of the records' bodies appended since Open

	fenced   atomic.Bool
	appended atomic.Uint64 // the last command stored in the stream by this node
	storedN  atomic.Uint64 // records appended since Open and known stored
	pending  atomic.Uint64 // Follow: records after the last one delivered, as the server last said
	stalled  atomic.Int64  // unix ns since when appends go unconfirmed (0: they are confirmed)
	streamSq atomic.Uint64 // the stream sequence of the last record this node stored
	refused  atomic.Uint64 // appends refused by the fence
}

// sent is one record in flight.
type sent struct {
	id      string
	subject string
	body    []byte
	upTo    core.Seq               // the log's last command once it is stored
	fut     jetstream.PubAckFuture // nil: not sent (WaitStored reads back and sends again)
}

// untilReady calls create until it succeeds, ctx ends or final (if set)
// says its error is not a cluster's that has just started: such a cluster
// may not know its peers yet ("no suitable peers"), or have no meta
// leader. It answers create's last error.
func untilReady(ctx context.Context, log *slog.Logger, what string, final func(error) bool, create func() error) error {
	for {
		err := create()
		if err == nil || ctx.Err() != nil || (final != nil && final(err)) {
			return err
		}
		log.Warn("replication: "+what+" not ready, retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Open connects to NATS and creates the stream (or updates its config).
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Attempt == 0 {
		cfg.Attempt = DefaultAttempt
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.URL == "" {
		return nil, errors.New("replication: no NATS URL")
	}
	nc, js, err := connect(cfg, cfg.URL, false)
	if err != nil {
		return nil, err
	}
	scfg := jetstream.StreamConfig{
		Name:       cfg.Stream,
		Subjects:   []string{cfg.Subject + ".*"}, // <subject>.<kind>: see subject
		Storage:    jetstream.FileStorage,
		Replicas:   cfg.Replicas,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew, // never drop an old record to make room: refuse the append
		Duplicates: 2 * time.Minute,
	}
	var s jetstream.Stream
	err = untilReady(ctx, cfg.Logger, "stream "+cfg.Stream, nil, func() (err error) {
		s, err = js.CreateOrUpdateStream(ctx, scfg)
		return err
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("replication: stream %s (replicas %d): %w", cfg.Stream, cfg.Replicas, err)
	}
	if !cfg.AnyNode {
		if hnc, hjs, hs, ok := homeToLeader(ctx, cfg, nc, s); ok {
			nc.Close()
			nc, js, s = hnc, hjs, hs
		}
	}
	return &Log{cfg: cfg, log: cfg.Logger, nc: nc, js: js, stream: s,
		maxMsg: int(nc.MaxPayload()) - headroom}, nil
}

// connect opens the log's NATS connection and its JetStream context;
// ordered: try the URLs in the order given (the first is the stream's
// leader).
func connect(cfg Config, url string, ordered bool) (*nats.Conn, jetstream.JetStream, error) {
	nc, js, err := dial("ubscore-replication-"+cfg.Node, url, ordered, jetstream.WithPublishAsyncTimeout(cfg.Attempt))
	if err != nil {
		return nil, nil, fmt.Errorf("replication: %w", err)
	}
	return nc, js, nil
}

// dial is every connection of the package (the log, the lease, the
// snapshot bucket): named name, reconnecting without end, every 100 ms;
// ordered: the URLs tried in the order given.
func dial(name, url string, ordered bool, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nopts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond), nats.Timeout(2 * time.Second)}
	if ordered {
		nopts = append(nopts, nats.DontRandomize())
	}
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// homeToLeader connects again, to the node that leads the stream, if nc is
// connected to another node of a cluster: an append then goes straight to
// the leader, which replicates it and answers, instead of crossing a route
// to it and back (one hop each way, on each append: on a loaded machine
// each hop is a wake-up that waits for a CPU). In-process cluster, 200k
// commands/s, 3 pairs: the store wait's median 476-1074 µs on the leader
// against 555-2542 µs through a follower (docs/replication.md, "Benchmark").
// The leader is found by asking each URL's server its name; the
// new connection lists the leader first and does not shuffle, and fails
// over to the others as before. ok is false (keep nc) when nc is on the
// leader already, the stream has no leader now, or no URL answers as it:
// only the path is at stake, never correctness. The leader may move later
// (a node restarts); the connection stays where it is then.
func homeToLeader(ctx context.Context, cfg Config, nc *nats.Conn, s jetstream.Stream) (*nats.Conn, jetstream.JetStream, jetstream.Stream, bool) {
	urls := strings.Split(cfg.URL, ",")
	if len(urls) < 2 {
		return nil, nil, nil, false
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	info, err := s.Info(ictx)
	cancel()
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == nc.ConnectedServerName() {
		return nil, nil, nil, false
	}
	leader := -1
	for i, u := range urls {
		probe, err := nats.Connect(strings.TrimSpace(u), nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			continue
		}
		name := probe.ConnectedServerName()
		probe.Close()
		if name == info.Cluster.Leader {
			leader = i
			break
		}
	}
	if leader < 0 {
		return nil, nil, nil, false
	}
	urls[0], urls[leader] = urls[leader], urls[0]
	hnc, hjs, err := connect(cfg, strings.Join(urls, ","), true)
	if err != nil {
		return nil, nil, nil, false
	}
	hs, err := hjs.Stream(ctx, cfg.Stream)
	if err != nil || hnc.ConnectedServerName() != info.Cluster.Leader {
		hnc.Close()
		return nil, nil, nil, false
	}
	cfg.Logger.Info("replication: connected to the stream's leader", "server", info.Cluster.Leader)
	return hnc, hjs, hs, true
}

// Close closes the connection.
func (l *Log) Close() { l.nc.Drain() } //nolint:errcheck // closing either way

// Epoch is this node's epoch as the writer (0: not the writer).
func (l *Log) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Fenced tells whether an append of this node has been refused because
// another node appended.
func (l *Log) Fenced() bool { return l.fenced.Load() }

// Appended is the last command this node has stored in the stream.
func (l *Log) Appended() core.Seq { return core.Seq(l.appended.Load()) }

// Refused counts this node's appends refused by the fence.
func (l *Log) Refused() uint64 { return l.refused.Load() }

// Sent is how many records, and bytes of their bodies (compressed), this
// node has appended since Open.
func (l *Log) Sent() (records, bytes uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enqueued, l.sentB
}

// Stalled is how long appends have gone unconfirmed (0: they are
// confirmed): the stream has no quorum or cannot be reached.
func (l *Log) Stalled() time.Duration {
	if t := l.stalled.Load(); t != 0 {
		return time.Since(time.Unix(0, t))
	}
	return 0
}

// Tail is the stream's last record (nil if the stream is empty) and its
// stream sequence. It is bounded by two attempts' time: a request sent on
// a connection whose server died, or to a stream without a leader, may
// never be answered, and the caller (a promotion) tries again.
func (l *Log) Tail(ctx context.Context) (uint64, *Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*l.cfg.Attempt)
	defer cancel()
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("replication: stream info: %w", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return last, nil, nil
	}
	r, err := l.get(ctx, last)
	if err != nil {
		return 0, nil, err
	}
	return last, &r, nil
}

// Held is the range of commands the log holds, first..last: last is its
// last record's Last(); first is the first command after the front of the
// stream (which may have been trimmed): its first record's first command,
// or, for an epoch marker or a hash, the command after the last one before
// it. An empty stream holds none: first is last+1 (1, 0 if it never held a
// record; a stream purged whole tells no last command either).
func (l *Log) Held(ctx context.Context) (first, last core.Seq, err error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("replication: stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return 1, 0, nil
	}
	head, err := l.get(ctx, info.State.FirstSeq)
	if err != nil {
		return 0, 0, err
	}
	tail, err := l.get(ctx, info.State.LastSeq)
	if err != nil {
		return 0, 0, err
	}
	first = head.Last() + 1
	if head.Kind == KindCommands {
		first = head.Seq
	}
	return first, tail.Last(), nil
}

// get reads and decodes the record at stream sequence sq.
func (l *Log) get(ctx context.Context, sq uint64) (Record, error) {
	m, err := l.stream.GetMsg(ctx, sq)
	if err != nil {
		return Record{}, fmt.Errorf("replication: read record %d: %w", sq, err)
	}
	r, err := DecodeRecord(m.Data)
	if err != nil {
		return Record{}, fmt.Errorf("replication: record %d: %w", sq, err)
	}
	return r, nil
}

// Claim makes this node the log's writer at epoch: it appends an epoch
// marker expecting the stream's last sequence to be at (the last record
// the caller has read and applied; 0 for an empty stream). If another node
// appended after at, Claim returns ErrBehind: read on and claim again.
// applied is the last command the caller holds; epoch must be above every
// epoch in the log.
func (l *Log) Claim(ctx context.Context, at uint64, applied core.Seq, epoch uint64) error {
	if l.fenced.Load() {
		return ErrFenced
	}
	l.mu.Lock()
	venue := l.cfg.Venue
	l.mu.Unlock()
	body := appendEpoch(nil, epoch, applied, l.cfg.Node, venue)
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subject(KindEpoch), Data: body,
		Header: nats.Header{jetstream.MsgIDHeader: []string{msgID(epoch, KindEpoch, applied)}}},
		jetstream.WithExpectLastSequence(at))
	if wrongLast(err) {
		return fmt.Errorf("%w (expected stream sequence %d): %v", ErrBehind, at, err)
	}
	if err != nil {
		return fmt.Errorf("replication: claim epoch %d: %w", epoch, err)
	}
	l.mu.Lock()
	l.epoch, l.last, l.sentUpTo = epoch, ack.Sequence, applied
	l.queue = nil // a failed attempt's appends: the claim follows whatever of them the log stored
	l.mu.Unlock()
	l.streamSq.Store(ack.Sequence)
	l.appended.Store(uint64(applied))
	l.log.Info("replication: claimed the log", "node", l.cfg.Node, "epoch", epoch, "stream_seq", ack.Sequence,
		"seq", applied)
	return nil
}

// Venue is the venue this node's claims carry (Config.Venue, or the one
// it adopted from the log's epoch markers).
func (l *Log) Venue() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Venue
}

// setVenue sets the venue this node's claims carry.
func (l *Log) setVenue(v string) {
	l.mu.Lock()
	l.cfg.Venue = v
	l.mu.Unlock()
}

// adopt makes this node the writer at epoch without a new marker: its own
// epoch marker is the log's last record, at stream sequence at.
func (l *Log) adopt(epoch, at uint64, applied core.Seq) {
	l.mu.Lock()
	l.epoch, l.last, l.sentUpTo = epoch, at, applied
	l.queue = nil // as Claim
	l.mu.Unlock()
	l.streamSq.Store(at)
	l.appended.Store(uint64(applied))
	l.log.Info("replication: the log's last record is this node's claim: writing on", "node", l.cfg.Node, "epoch", epoch)
}

// wrongLast tells whether err is the stream refusing an expected last
// sequence (either of the two codes the server uses).
func wrongLast(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

// subject is where records of kind k go: <Config.Subject>.<kind letter>,
// so the newest epoch marker is one read (LastEpoch).
func (l *Log) subject(k Kind) string { return l.cfg.Subject + "." + string(rune(k)) }

// LastEpoch is the newest epoch marker of the log (nil: none).
func (l *Log) LastEpoch(ctx context.Context) (*Record, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, l.subject(KindEpoch))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replication: the newest epoch marker: %w", err)
	}
	r, err := DecodeRecord(m.Data)
	if err != nil {
		return nil, fmt.Errorf("replication: epoch marker %d: %w", m.Sequence, err)
	}
	return &r, nil
}

// msgID names a record uniquely in the log: the writer's epoch, the kind
// and the first command (or seq) it covers.
func msgID(epoch uint64, k Kind, seq core.Seq) string {
	return strconv.FormatUint(epoch, 10) + "." + string(rune(k)) + "." + strconv.FormatUint(uint64(seq), 10)
}

// Append sends the commands first..first+len(cmds)-1 (the WAL's payloads;
// copied) to the log, split over the server's max payload, without
// waiting: several appends may be in flight, each message expecting the one
// before it, so a refused or lost message makes every later one fail too
// and the log never gets a hole. WaitStored tells when they are stored.
// Safe beside WaitStored; one goroutine appends.
//
// Commands the log holds already (first <= the last one appended or
// claimed) are skipped: a promoted standby's journaler may write, after
// the promotion, commands it applied from the log before it (SubmitSequenced
// returns before they are journaled), and a second copy after the epoch
// marker would break the log's order for every follower. A gap (first
// beyond the next command) is refused: the log would miss commands.
//
// The records are encoded (compressed) outside mu: WaitStored takes it to
// learn each ack, and must not wait for a large group commit's encoding.
func (l *Log) Append(first core.Seq, cmds [][]byte) error {
	l.mu.Lock()
	err := l.writable()
	epoch, upTo := l.epoch, l.sentUpTo
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if first > upTo+1 {
		return fmt.Errorf("replication: append from command %d, but the log holds commands up to %d only (a gap)", first, upTo)
	}
	if skip := int(min(uint64(upTo+1-first), uint64(len(cmds)))); skip > 0 {
		first, cmds = first+core.Seq(skip), cmds[skip:]
	}
	for len(cmds) > 0 {
		n := l.fits(cmds)
		r := sent{id: msgID(epoch, KindCommands, first), subject: l.subject(KindCommands),
			body: l.enc.append(nil, epoch, first, cmds[:n]), upTo: first + core.Seq(n) - 1}
		l.mu.Lock()
		err := l.writable()
		if err == nil && (l.epoch != epoch || l.sentUpTo != first-1) {
			err = fmt.Errorf("replication: the log moved during an append (epoch %d, commands up to %d; expected %d, %d)",
				l.epoch, l.sentUpTo, epoch, first-1)
		}
		if err == nil {
			l.enqueue(r)
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		first += core.Seq(n)
		cmds = cmds[n:]
	}
	return nil
}

// fits is how many of cmds (at least one) one KindCommands record takes:
// within maxCommandsCount and maxCommandsPart, and its body within the
// server's max payload even if they do not compress at all.
func (l *Log) fits(cmds [][]byte) int {
	n, part := 1, commandsPart(cmds[:1])
	for ; n < min(len(cmds), maxCommandsCount); n++ {
		next := part + commandsPart(cmds[n:n+1])
		if next > maxCommandsPart || commandsOverhead+s2.MaxEncodedLen(next) > l.maxMsg {
			break
		}
		part = next
	}
	return n
}

// AppendHash sends the writer's state hash after command seq, which must
// already be appended, without waiting.
func (l *Log) AppendHash(seq core.Seq, hash string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if seq == 0 || seq > l.sentUpTo {
		return fmt.Errorf("replication: hash after command %d, but the log holds commands up to %d", seq, l.sentUpTo)
	}
	l.enqueue(sent{id: msgID(l.epoch, KindHash, seq), subject: l.subject(KindHash), body: appendHash(nil, l.epoch, seq, l.sentUpTo, hash), upTo: l.sentUpTo})
	return nil
}

// writable is nil if this node may append (under mu).
func (l *Log) writable() error {
	if l.fenced.Load() {
		return ErrFenced
	}
	if l.epoch == 0 {
		return ErrNotWriter
	}
	return nil
}

// enqueue adds a record to the queue and sends it (under mu).
func (l *Log) enqueue(r sent) {
	l.queue = append(l.queue, r)
	l.enqueued++
	l.sentB += uint64(len(r.body))
	l.sentUpTo = r.upTo
	l.send(len(l.queue) - 1)
}

// send publishes queue[i], expecting the stream's last sequence to be the
// record before it (under mu). A failed send leaves no future: WaitStored
// reads the stream back and sends it again.
func (l *Log) send(i int) {
	r := &l.queue[i]
	r.fut = nil
	fut, err := l.js.PublishMsgAsync(&nats.Msg{Subject: r.subject, Data: r.body,
		Header: nats.Header{jetstream.MsgIDHeader: []string{r.id}}},
		jetstream.WithExpectLastSequence(l.last+uint64(i)),
		// No client-side resend on "no responders": nats.go's resend stops
		// the ack timeout, so a lost resend would leave the future unresolved
		// forever; WaitStored reads the stream back and resends instead.
		jetstream.WithRetryAttempts(0))
	if err == nil {
		r.fut = fut
	}
}

// Wait returns once every record appended so far (commands and hashes) is
// stored; see WaitStored.
func (l *Log) Wait(ctx context.Context) error {
	l.mu.Lock()
	n := l.enqueued
	l.mu.Unlock()
	return l.waitUntil(ctx, func() bool { return l.storedN.Load() >= n })
}

// WaitStored returns once the log has stored every command up to seq (a
// quorum of the stream's replicas holds it), retrying while the stream
// cannot answer (no quorum, no connection) until ctx ends; ErrFenced if
// another node appended first. One goroutine waits.
func (l *Log) WaitStored(ctx context.Context, seq core.Seq) error {
	return l.waitUntil(ctx, func() bool { return core.Seq(l.appended.Load()) >= seq })
}

// waitUntil takes the queue's acks in order until done holds.
func (l *Log) waitUntil(ctx context.Context, done func() bool) error {
	backoff := 20 * time.Millisecond
	failures := 0
	var lastErr error
	var lastWarn time.Time
	answer := time.NewTimer(time.Hour)
	answer.Stop()
	for !done() {
		l.mu.Lock()
		if err := l.writable(); err != nil {
			l.mu.Unlock()
			return err
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return fmt.Errorf("replication: wait for a record never appended (appended up to command %d)", l.sentUpTo)
		}
		fut := l.queue[0].fut
		l.mu.Unlock()
		var err error
		if fut == nil {
			err = errors.New("not sent")
		} else {
			answer.Reset(2 * l.cfg.Attempt) // beyond the client's ack timeout: a future that never resolves
			select {
			case <-fut.Ok():
				answer.Stop()
				l.mu.Lock()
				l.pop()
				l.mu.Unlock()
				failures, backoff = 0, 20*time.Millisecond
				continue
			case err = <-fut.Err():
			case <-answer.C:
				err = errors.New("no answer to the append")
			case <-ctx.Done():
				answer.Stop()
				return fmt.Errorf("replication: append not confirmed: %w (last error: %v)", ctx.Err(), lastErr)
			}
			answer.Stop()
			l.mu.Lock() // every later future fails its expectation: read back instead
			for i := range l.queue {
				l.queue[i].fut = nil
			}
			l.mu.Unlock()
		}
		// Unknown outcome: read the stream back.
		lastErr = err
		l.stalled.CompareAndSwap(0, time.Now().UnixNano())
		if failures == 0 || time.Since(lastWarn) >= 5*time.Second {
			l.log.Warn("replication: append not confirmed, reading the log back", "err", err, "failures", failures)
			lastWarn = time.Now()
		}
		failures++
		select {
		case <-ctx.Done():
			return fmt.Errorf("replication: append not confirmed: %w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		l.mu.Lock()
		err = l.reconcile(ctx)
		if err == nil {
			for i := range l.queue { // the rest, in order, expecting what is stored
				l.send(i)
			}
		} else {
			lastErr = err
			if time.Since(lastWarn) >= 5*time.Second {
				l.log.Warn("replication: the log cannot be read back yet", "err", err, "failures", failures)
				lastWarn = time.Now()
			}
		}
		l.mu.Unlock()
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}

// pop marks the head of the queue stored (under mu): the log confirms
// appends again, however it was learnt (an ack, or reading the stream back).
func (l *Log) pop() {
	l.stalled.Store(0)
	r := l.queue[0]
	l.last++
	l.storedN.Add(1)
	l.streamSq.Store(l.last)
	l.appended.Store(uint64(r.upTo))
	l.queue[0] = sent{}
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = l.queue[:0:0] // let the backing array go
	}
}

// reconcile reads the stream after l.last (under mu): the queued records
// found there, in order, are stored; a record of anyone else fences this
// node.
func (l *Log) reconcile(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Attempt) // a stream without a leader does not answer
	defer cancel()
	info, err := l.stream.Info(ctx)
	if err != nil {
		return err
	}
	for sq := l.last + 1; sq <= info.State.LastSeq; sq++ {
		m, err := l.stream.GetMsg(ctx, sq)
		if err != nil {
			return err
		}
		if len(l.queue) == 0 || m.Header.Get(jetstream.MsgIDHeader) != l.queue[0].id {
			return l.fence(fmt.Errorf("stream sequence %d holds %q", sq, m.Header.Get(jetstream.MsgIDHeader)))
		}
		l.pop()
	}
	return nil
}

func (l *Log) fence(cause error) error {
	if !l.fenced.Swap(true) {
		l.refused.Add(1)
		l.log.Error("replication: FENCED: another node appended to the log; acknowledging nothing more",
			"node", l.cfg.Node, "epoch", l.epoch, "stream_seq", l.last, "cause", cause)
	}
	return fmt.Errorf("%w: %v", ErrFenced, cause)
}

// Follow delivers every record from stream sequence from on, in order, to
// fn, with its stream sequence, until ctx ends or fn fails. It does not
// stop at the end of the stream: it waits for new records, and outlives
// the stream's outages (no quorum, a reconnect) by reading on from where
// it was. A record delivered again is skipped; a gap or an undecodable
// record is an error.
func (l *Log) Follow(ctx context.Context, from uint64, fn func(sq uint64, r Record) error) error {
	next := max(from, 1)
	for failures := 0; ; failures++ {
		err := l.followFrom(ctx, &next, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fatal *followError
		if errors.As(err, &fatal) {
			return fatal.err
		}
		if failures%20 == 0 {
			l.log.Warn("replication: follow interrupted, reading on", "from", next, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// followError is an error Follow must not retry: a gap, a record it cannot
// decode, or fn's.
type followError struct{ err error }

func (e *followError) Error() string { return e.err.Error() }

// inOrder says whether the record at stream sequence sq is the next one
// (next): one delivered again (an ordered consumer that reset itself reads
// from where it thought it was) is skipped, having been applied; one past
// next is a gap, an error.
func inOrder(sq, next uint64) (bool, error) {
	switch {
	case sq < next:
		return false, nil
	case sq > next:
		return false, fmt.Errorf("replication: follow: stream sequence %d after %d (a gap: purged?)", sq, next-1)
	}
	return true, nil
}

// followFrom is one ordered consumer's session of Follow, from *next.
func (l *Log) followFrom(ctx context.Context, next *uint64, fn func(sq uint64, r Record) error) error {
	attempt, cancel := context.WithTimeout(ctx, l.cfg.Attempt) // a cluster regaining its quorum may not answer yet
	// MaxResetAttempts 1: the ordered consumer re-creates its consumer on
	// every Fetch, by default retrying without end and without looking at
	// ctx; a failed re-creation must come back here instead (Follow reads
	// on, or stops once ctx ends): a promotion waits for the follow to
	// stop, and hung forever while the stream's leader was being replaced.
	cons, err := l.stream.OrderedConsumer(attempt, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: *next, MaxResetAttempts: 1})
	cancel()
	if err != nil {
		return fmt.Errorf("replication: follow from %d: %w", *next, err)
	}
	for {
		msgs, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("replication: follow: %w", err)
		}
		// A select, not a range: a promotion cancels ctx and must not wait
		// out an idle fetch (up to FetchMaxWait) before it claims the log.
		ch := msgs.Messages()
		for m, ok := recvMsg(ctx, ch); ok; m, ok = recvMsg(ctx, ch) {
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("replication: follow: %w", err)
			}
			sq := md.Sequence.Stream
			l.pending.Store(md.NumPending)
			if apply, err := inOrder(sq, *next); err != nil {
				return &followError{err}
			} else if !apply {
				continue
			}
			r, err := DecodeRecord(m.Data())
			if err != nil {
				return &followError{fmt.Errorf("replication: record %d: %w", sq, err)}
			}
			if err := fn(sq, r); err != nil {
				return &followError{err}
			}
			*next = sq + 1
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !strings.Contains(err.Error(), "timeout") {
			return fmt.Errorf("replication: follow: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// recvMsg is the next message of ch, or false once ch is closed or ctx ends.
func recvMsg(ctx context.Context, ch <-chan jetstream.Msg) (jetstream.Msg, bool) {
	select {
	case <-ctx.Done():
		return nil, false
	case m, ok := <-ch:
		return m, ok
	}
}

// Seek finds the stream sequence of the record holding command seq (for a
// node that resumes following after its own WAL's last command): the first
// record whose Last() >= seq, by binary search (Last never decreases along
// the log). It returns the stream's last sequence + 1 if no record holds
// seq yet.
func (l *Log) Seek(ctx context.Context, seq core.Seq) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("replication: stream info: %w", err)
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq+1 // answer in [lo, hi]
	if info.State.Msgs == 0 {
		return hi, nil
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		r, err := l.get(ctx, mid)
		if err != nil {
			return 0, err
		}
		if r.Last() < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
