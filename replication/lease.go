package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The lease: which node should be the primary (issue 38).
//
// It is a key in a JetStream key-value bucket whose stream has a
// bucket-level TTL (MaxAge = LeaseConfig.TTL, history 1): every renewal is a
// new revision of the key, written with compare-and-set on the revision the
// holder last wrote (kv.Update(key, value, rev), i.e.
// Nats-Expected-Last-Subject-Sequence), so two nodes can never both think
// they renewed the same lease; a key nobody renews for a TTL is removed by
// the server. (Per-key TTLs are not used: nats-server v2.9.10 ignores them
// silently.)
//
// Reads of the key are eventually consistent: the bucket allows direct
// gets, which any replica answers, one that lags included (a Get right
// after a Delete returned the deleted value on v2.9.10). No decision rests
// on a read alone: a stale read makes a taker wait longer, or try a
// compare-and-set that the stream leader refuses; it never gives the lease
// to two nodes and never takes it from a holder that renews.
//
// The lease decides only who TRIES to take over. Safety stays with the
// log's expected-sequence fence (log.go): a node that wrongly believes it
// holds the lease (a clock jump, a pause) can at worst append an epoch
// marker that fences the real primary, which then stops acknowledging;
// nothing acknowledged is lost or forked. What the lease must avoid is
// flapping: taking the primary away from a live node costs a take-over.
//
// Timing (the defaults, for this loaded 2-core machine, where the Go
// scheduler, GC and the other processes delay a goroutine by up to some
// hundreds of milliseconds and a replicated KV write takes ~1-10 ms, tens
// under load):
//
//   - the holder renews every Renew (250 ms), each write bounded by the time
//     it has left;
//   - the holder believes it holds the lease only until the send time of
//     its last successful renewal + TTL - Margin (2 s - 500 ms), measured on
//     the monotonic clock (time.Now's monotonic reading, which a SIGSTOP
//     does not stop): a holder that could not renew for 1.5 s — 6 renewals
//     in a row — stops claiming it at once (Held turns false without any
//     goroutine having to run, Lost is closed by a timer), and learns on its
//     next write that another node has it;
//   - another node takes the lease only after it has observed the same
//     revision for a full TTL on its own monotonic clock (or the key is
//     gone: the server removed it TTL after its last write, or the holder
//     released it). The revision was written after the holder sent it, so
//     the taker's "a TTL after I first saw it" is later than the holder's
//     "TTL - Margin after I sent it": on one machine (or with clock rates
//     that drift less than Margin/TTL) the two never both claim it.
//
// So a holder loses its lease only after 6 consecutive renewals fail or
// stall (1.5 s without a KV write), far above the renewal latencies
// measured here (TestLeaseNoFailoverInASteadyRun logs them); and a dead
// holder is replaced TTL + Poll after its last renewal (2.1 s). A shorter
// TTL fails over faster and risks a take-over on a long stall; a longer one
// the reverse. If the NATS node that leads the bucket's stream dies, no
// renewal can be stored until the cluster elects a new leader (4-9 s here):
// the holder then loses the lease; once the bucket is writable again it
// gets it straight back if nobody else wrote (Acquire retries its own last
// revision first), and otherwise a standby that observed a full TTL takes
// over — a failover without a dead primary, which the log's fence keeps
// safe.

// Defaults of LeaseConfig.
const (
	DefaultLeaseBucket = "UBS_LEASE"
	DefaultLeaseTTL    = 2 * time.Second
	DefaultLeaseRenew  = 250 * time.Millisecond
	DefaultLeaseMargin = 500 * time.Millisecond
	DefaultLeasePoll   = 100 * time.Millisecond
)

// Lease errors.
var (
	// ErrLeaseLost: the lease is not (or no longer) held by this node.
	ErrLeaseLost = errors.New("replication: lease lost")
	// ErrLeaseHeld: Acquire on a Lease that holds it already.
	ErrLeaseHeld = errors.New("replication: lease already held")
)

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	URL      string // NATS server URL(s), comma separated
	Bucket   string // the KV bucket; DefaultLeaseBucket if empty
	Key      string // the lease's key: the log's stream (one lease per venue); DefaultStream if empty
	Node     string // this node's name (required)
	Replicas int    // the bucket's replicas: 3 on a cluster (1 if 0)
	// TTL is the bucket's MaxAge and the time a taker waits without seeing
	// a renewal; Renew the holder's renewal interval; Margin how much
	// before TTL (from its last renewal's send) the holder stops claiming
	// it; Poll how often a node that waits looks at the key. The defaults
	// are explained in the comment above. Margin must be < TTL - Renew.
	TTL, Renew, Margin, Poll time.Duration
	// ManualRenew: no background renewal; the caller calls Renew (tests,
	// and a node that renews from its own loop).
	ManualRenew bool
	Logger      *slog.Logger
}

// leaseValue is what the key holds.
type leaseValue struct {
	Node string `json:"node"`
	At   int64  `json:"at_ms"` // wall clock of the write, informative only
}

// Lease is one node's handle on the primary lease. Safe for concurrent use.
type Lease struct {
	cfg LeaseConfig
	log *slog.Logger
	nc  *nats.Conn
	kv  jetstream.KeyValue

	mu       sync.Mutex
	held     bool          // since the last successful Acquire, until lost or released
	rev      uint64        // the revision this node last wrote (kept after a loss: Acquire retries it)
	deadline time.Time     // monotonic: renewed's send time + TTL - Margin
	lost     chan struct{} // closed when the current holding ends (lost or released)
	timer    *time.Timer   // fires at deadline
	stop     chan struct{} // stops the renewal loop of the current holding

	acquired atomic.Uint64 // successful Acquires
	maxRenew atomic.Int64  // the slowest successful renewal write, ns
}

// OpenLease connects to NATS and creates (or updates) the lease bucket.
func OpenLease(ctx context.Context, cfg LeaseConfig) (*Lease, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultLeaseBucket
	}
	if cfg.Key == "" {
		cfg.Key = DefaultStream
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.Renew == 0 {
		cfg.Renew = DefaultLeaseRenew
	}
	if cfg.Margin == 0 {
		cfg.Margin = DefaultLeaseMargin
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultLeasePoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.URL == "":
		return nil, errors.New("replication: lease: no NATS URL")
	case cfg.Node == "":
		return nil, errors.New("replication: lease: no node name")
	case cfg.Margin <= 0 || cfg.Renew <= 0 || cfg.Margin >= cfg.TTL-cfg.Renew:
		return nil, fmt.Errorf("replication: lease: margin %v must be > 0 and < TTL %v - renew %v", cfg.Margin, cfg.TTL, cfg.Renew)
	}
	nc, js, err := dial("ubscore-lease-"+cfg.Node, cfg.URL, false)
	if err != nil {
		return nil, fmt.Errorf("replication: lease: %w", err)
	}
	kcfg := jetstream.KeyValueConfig{
		Bucket:   cfg.Bucket,
		History:  1,
		TTL:      cfg.TTL, // the stream's MaxAge: a key not written for a TTL is removed
		Storage:  jetstream.FileStorage,
		Replicas: cfg.Replicas,
	}
	// Create, never update: the bucket's TTL is what removes a lapsed
	// holder's key, and every node times its own belief and its wait with
	// its own TTL. A node configured otherwise must not rewrite the bucket
	// under the holder (its key would expire while it still believes it
	// holds it): it is refused.
	var kv jetstream.KeyValue
	exists := func(err error) bool { return errors.Is(err, jetstream.ErrBucketExists) }
	err = untilReady(ctx, cfg.Logger, "lease bucket "+cfg.Bucket, exists, func() (err error) {
		kv, err = js.CreateKeyValue(ctx, kcfg)
		return err
	})
	if exists(err) {
		if have, gerr := js.KeyValue(ctx, cfg.Bucket); gerr == nil {
			if st, serr := have.Status(ctx); serr == nil {
				err = fmt.Errorf("has TTL %v; this node's is %v (and %d replicas): every node must use the same", st.TTL(), cfg.TTL, cfg.Replicas)
			}
		}
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("replication: lease bucket %s: %w", cfg.Bucket, err)
	}
	return &Lease{cfg: cfg, log: cfg.Logger, nc: nc, kv: kv}, nil
}

// Close stops renewing (without releasing: the lease then expires) and
// closes the connection.
func (l *Lease) Close() {
	l.end(false, "closed")
	l.nc.Close()
}

// Node is this node's name.
func (l *Lease) Node() string { return l.cfg.Node }

// Acquisitions counts this Lease's successful Acquires.
func (l *Lease) Acquisitions() uint64 { return l.acquired.Load() }

// MaxRenewal is the slowest successful renewal write so far.
func (l *Lease) MaxRenewal() time.Duration { return time.Duration(l.maxRenew.Load()) }

// Held tells whether this node holds the lease now: it acquired it, has not
// lost or released it, and its last successful renewal was sent less than
// TTL - Margin ago (monotonic clock). Computed at the call, so a process
// that was paused past its deadline answers false before any of its
// goroutines runs.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && time.Now().Before(l.deadline)
}

// Lost is closed when the current holding ends: the deadline passed
// without a renewal, a renewal found another node's write, or Release. Nil
// channel (blocks forever) if the lease was never acquired.
func (l *Lease) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Holder reads the key: the node named there and its revision ("" and 0 if
// there is none). Informative: it may change right after.
func (l *Lease) Holder(ctx context.Context) (string, uint64, error) {
	e, err := l.kv.Get(ctx, l.cfg.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("replication: lease: %w", err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return "", e.Revision(), fmt.Errorf("replication: lease: value %q: %w", e.Value(), err)
	}
	return v.Node, e.Revision(), nil
}

func (l *Lease) value() []byte {
	b, _ := json.Marshal(leaseValue{Node: l.cfg.Node, At: time.Now().UnixMilli()})
	return b
}

// Acquire waits until this node holds the lease (or ctx ends) and returns
// the revision it wrote: a number that grows with every acquisition of any
// node (the bucket stream's sequence), a hint for the epoch (the log's
// Claim decides the real one). It takes the key when it is absent (expired,
// released), when it names this node (its own renewal whose answer was
// lost, or a restart under the same name), when it still holds the
// revision this node last wrote (a holding lost only to the local
// deadline, with no other write since), or when the same revision has
// been observed for a full TTL; every take is a compare-and-set, so of
// concurrent takers one wins.
func (l *Lease) Acquire(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	if l.held {
		l.mu.Unlock()
		return 0, ErrLeaseHeld
	}
	own := l.rev
	l.mu.Unlock()
	var seenRev uint64
	var seenAt time.Time
	for {
		op, cancel := context.WithTimeout(ctx, l.cfg.TTL)
		e, err := l.kv.Get(op, l.cfg.Key)
		cancel()
		var expect uint64 // the revision to take over with compare-and-set
		take := false
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			take = true // Create: no message for the key, or a delete marker
		case err != nil:
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			l.log.Debug("replication: lease: read failed", "err", err)
		default:
			var v leaseValue
			_ = json.Unmarshal(e.Value(), &v)
			now := time.Now()
			switch {
			case v.Node == l.cfg.Node || (own != 0 && e.Revision() == own):
				take, expect = true, e.Revision()
			case e.Revision() != seenRev:
				seenRev, seenAt = e.Revision(), now
			case now.Sub(seenAt) >= l.cfg.TTL:
				take, expect = true, seenRev
				l.log.Info("replication: lease: no renewal seen for a TTL; taking it", "holder", v.Node,
					"revision", seenRev, "unchanged_for", now.Sub(seenAt))
			}
		}
		if take {
			sent := time.Now()
			op, cancel := context.WithTimeout(ctx, l.cfg.TTL-l.cfg.Margin)
			var rev uint64
			if expect == 0 {
				rev, err = l.kv.Create(op, l.cfg.Key, l.value())
			} else {
				rev, err = l.kv.Update(op, l.cfg.Key, l.value(), expect)
			}
			cancel()
			if err == nil {
				l.took(rev, sent)
				return rev, nil
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			// Another node wrote first (ErrKeyExists, revision mismatch), or
			// the write failed: look again.
			l.log.Debug("replication: lease: take failed", "err", err)
			seenRev = 0
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(l.cfg.Poll):
		}
	}
}

// took records a successful take (the write sent at sent, stored as rev)
// and starts the renewal loop.
func (l *Lease) took(rev uint64, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.rev = true, rev
	l.deadline = sent.Add(l.cfg.TTL - l.cfg.Margin)
	l.lost = make(chan struct{})
	lost := l.lost
	l.timer = time.AfterFunc(time.Until(l.deadline), func() { l.expire(lost) })
	l.acquired.Add(1)
	l.log.Info("replication: lease acquired", "node", l.cfg.Node, "revision", rev)
	if !l.cfg.ManualRenew {
		l.stop = make(chan struct{})
		go l.renewLoop(l.stop)
	}
}

// expire ends the holding lost if its deadline has passed (the timer may
// fire late, or race a renewal that moved the deadline).
func (l *Lease) expire(lost chan struct{}) {
	l.mu.Lock()
	if !l.held || l.lost != lost {
		l.mu.Unlock()
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.endIf(lost, "no renewal stored before the deadline")
}

func (l *Lease) renewLoop(stop chan struct{}) {
	t := time.NewTicker(l.cfg.Renew)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if err := l.Renew(context.Background()); errors.Is(err, ErrLeaseLost) {
			return
		} else if err != nil {
			l.log.Warn("replication: lease renewal failed; retrying", "err", err, "left", l.left())
		}
	}
}

func (l *Lease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// Renew writes the next revision of the lease (compare-and-set on the last
// one), bounded by the time left before the deadline. ErrLeaseLost if the
// lease is not held (any more): the deadline passed, or another node wrote
// the key (the holding then ends at once). Any other error is transient:
// the lease is still held until its deadline.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	lost, rev := l.lost, l.rev
	if !l.held {
		l.mu.Unlock()
		return ErrLeaseLost
	}
	left := time.Until(l.deadline)
	l.mu.Unlock()
	if left <= 0 {
		l.endIf(lost, "no renewal stored before the deadline")
		return ErrLeaseLost
	}
	sent := time.Now()
	op, cancel := context.WithTimeout(ctx, left)
	nrev, err := l.kv.Update(op, l.cfg.Key, l.value(), rev)
	cancel()
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		// This node's previous renewal may have been stored with its answer
		// lost (a reconnect, a timeout): the key then names this node at a
		// later revision. Write again on that revision; the compare-and-set
		// still fails if another node wrote since. The deadline counts from
		// the first attempt's send.
		nrev, err = l.renewOwn(ctx, rev, err, sent.Add(left))
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			l.endIf(lost, "another node wrote the lease (or it expired)")
			return fmt.Errorf("%w: %w", ErrLeaseLost, err)
		}
		return fmt.Errorf("replication: lease renewal: %w", err)
	}
	took := time.Since(sent)
	for {
		m := l.maxRenew.Load()
		if int64(took) <= m || l.maxRenew.CompareAndSwap(m, int64(took)) {
			break
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held || l.lost != lost || !time.Now().Before(l.deadline) {
		// Stored, but after this node stopped claiming it: keep the
		// revision (Acquire takes it back if nobody else writes), claim
		// nothing.
		if l.lost == lost {
			l.rev = nrev
		}
		return ErrLeaseLost
	}
	l.rev = nrev
	l.deadline = sent.Add(l.cfg.TTL - l.cfg.Margin)
	return nil
}

// renewOwn is Renew's second try after a compare-and-set on rev failed
// with cause: if the key names this node at a later revision (its own
// renewal, stored, its answer lost), it writes again on that one, before
// by; else it answers cause.
func (l *Lease) renewOwn(ctx context.Context, rev uint64, cause error, by time.Time) (uint64, error) {
	op, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	e, err := l.kv.Get(op, l.cfg.Key)
	if err != nil || e.Revision() <= rev || !l.mine(e.Value()) {
		return 0, cause
	}
	return l.kv.Update(op, l.cfg.Key, l.value(), e.Revision())
}

// mine says whether a value of the key names this node.
func (l *Lease) mine(b []byte) bool {
	var v leaseValue
	return json.Unmarshal(b, &v) == nil && v.Node == l.cfg.Node
}

// Release gives the lease up: the renewal loop stops and the key is deleted
// (compare-and-set on this node's revision), so a waiting node takes it at
// its next look instead of after a TTL. Release of a lease not held does
// nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	held, rev := l.held, l.rev
	l.mu.Unlock()
	l.end(false, "released")
	if !held {
		return nil
	}
	// A renewal in flight when the holding ended may still land after rev:
	// delete whatever revision of the key names this node (a few tries),
	// never one of another node.
	for range 3 {
		err := l.kv.Delete(ctx, l.cfg.Key, jetstream.LastRevision(rev))
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("replication: lease release: %w", err)
		}
		holder, cur, herr := l.Holder(ctx)
		if herr != nil {
			return fmt.Errorf("replication: lease release: %w", herr)
		}
		if holder != l.cfg.Node || cur == rev {
			break // another node's (or gone), or a stale read: it expires in a TTL at worst
		}
		rev = cur
	}
	l.mu.Lock()
	l.rev = 0
	l.mu.Unlock()
	return nil
}

// endIf ends the holding whose Lost channel is lost (not a later one).
func (l *Lease) endIf(lost chan struct{}, why string) {
	l.mu.Lock()
	if l.lost != lost {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(true, why)
}

// end ends the current holding, if any: Held turns false, Lost is closed,
// the timer stops and the renewal loop is told to stop (it may be the
// caller: Renew inside it; it returns at its next look either way, and a
// renewal it has in flight can only be refused or ignored: held is false).
func (l *Lease) end(warn bool, why string) {
	l.mu.Lock()
	if !l.held {
		l.mu.Unlock()
		return
	}
	l.held = false
	close(l.lost)
	l.timer.Stop()
	if l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
	l.mu.Unlock()
	if warn {
		l.log.Warn("replication: lease lost: this node must not act as the primary", "node", l.cfg.Node, "why", why)
	} else {
		l.log.Info("replication: lease ended", "node", l.cfg.Node, "why", why)
	}
}
