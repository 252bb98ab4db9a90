package ring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// MaxCapacity is the largest capacity New accepts (2^24 slots).
const MaxCapacity = 1 << 24

var (
	// ErrClosed is returned to producers and (once drained) to stages after
	// Close.
	ErrClosed = errors.New("ring: closed")
	// ErrCapacity is returned by New for a capacity that is not a power of
	// two in [1, MaxCapacity].
	ErrCapacity = errors.New("ring: capacity must be a power of two in [1, MaxCapacity]")
)

// Ring is a bounded multi-producer ring of T stored by value. Slots are
// allocated once by New; writing an entry copies it into its slot, so a
// fixed-size T needs no allocation per entry.
//
// Producers call Claim or TryClaim, write the claimed slots through Slot, and
// Publish them. Stages created with NewStage read them. All stages must be
// created before the first claim.
type Ring[T any] struct {
	// Read-only after New.

	// buf[seq & mask] holds entry seq. Written only by the producer that
	// claimed seq, between Claim and Publish; read by stages once they see
	// seq as readable, until the gating stages commit it.
	buf []T
	// mark[lo & mask] = hi is stored by Publish(lo, hi) (a release store;
	// stages load it before reading the slots). lo <= mark < lo+size means
	// "[lo, hi] is published"; see the package doc.
	mark []atomic.Int64
	mask int64 // size - 1
	size int64 // capacity, a power of two

	// claimed is the highest seq handed out. Advanced only by CAS in
	// Claim/TryClaim; claimed <= min(gating) + size at all times.
	claimed Sequence
	// gateCache is a lower bound of min(gating): a value that min once had
	// (min is monotone). Written and read by producers; avoids reading
	// every gating Sequence on every claim.
	gateCache Sequence

	// gating holds the Sequences of the final stages (those no stage
	// follows). Replaced (copy-on-write) by NewStage under mu; loaded by
	// producers. nil until the first stage exists.
	gating atomic.Pointer[[]*Sequence]
	// closed is set once by Close and never cleared.
	closed atomic.Bool
	// mu serialises NewStage.
	mu sync.Mutex

	// published wakes stages that follow the publishers (signalled by
	// Publish); progress wakes stages that follow other stages (signalled
	// by Commit and by a stage finishing); room wakes producers blocked on
	// a full ring (signalled by Commit). Close broadcasts all three.
	published notifier
	progress  notifier
	room      notifier
}

// New returns a ring with the given capacity, which must be a power of two
// in [1, MaxCapacity].
func New[T any](capacity int) (*Ring[T], error) {
	if capacity < 1 || capacity > MaxCapacity || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("%w: got %d", ErrCapacity, capacity)
	}
	r := &Ring[T]{
		buf:  make([]T, capacity),
		mark: make([]atomic.Int64, capacity),
		mask: int64(capacity - 1),
		size: int64(capacity),
	}
	r.published.init()
	r.progress.init()
	r.room.init()
	return r, nil
}

// Cap returns the capacity (number of slots).
func (r *Ring[T]) Cap() int { return int(r.size) }

// Slot returns the slot of seq. A producer writes the slots it claimed before
// publishing them; a stage reads the slots WaitFor made available until it
// commits them. Any other access is a data race.
func (r *Ring[T]) Slot(seq int64) *T { return &r.buf[seq&r.mask] }

// Claimed returns the highest seq handed out so far (0 if none), for metrics.
func (r *Ring[T]) Claimed() int64 { return r.claimed.Load() }

// Closed reports whether Close has been called.
func (r *Ring[T]) Closed() bool { return r.closed.Load() }

// claimSize validates a claim of n entries and returns it as an int64. A
// claim outside [1, Cap()] or on a ring without stages is a programming
// error and panics.
func (r *Ring[T]) claimSize(n int) int64 {
	if n < 1 || int64(n) > r.size {
		panic(fmt.Sprintf("ring: claim of %d entries, want 1..%d", n, r.size))
	}
	if r.gating.Load() == nil {
		panic("ring: claim before any stage was created with NewStage")
	}
	return int64(n)
}

// hasRoom reports whether seqs up to next can be claimed without lapping a
// gating stage.
func (r *Ring[T]) hasRoom(next int64) bool {
	wrap := next - r.size
	if wrap <= r.gateCache.Load() {
		return true
	}
	m := minSeq(*r.gating.Load())
	r.gateCache.Store(m) // may briefly regress under races: still a lower bound
	return wrap <= m
}

// TryClaim reserves the next n seqs without blocking and returns them as
// [lo, hi] (hi = lo+n-1). ok is false, and nothing is reserved, when the ring
// lacks n free slots or is closed (see Closed to tell them apart). The
// caller must write and Publish the whole range. n must be in [1, Cap()].
func (r *Ring[T]) TryClaim(n int) (lo, hi int64, ok bool) {
	k := r.claimSize(n)
	for {
		if r.closed.Load() {
			return 0, 0, false
		}
		cur := r.claimed.Load()
		if !r.hasRoom(cur + k) {
			return 0, 0, false
		}
		if r.claimed.CompareAndSwap(cur, cur+k) {
			return cur + 1, cur + k, true
		}
	}
}

// Claim reserves the next n seqs, waiting while the ring is full, and returns
// them as [lo, hi] (hi = lo+n-1). It returns ErrClosed, with nothing
// reserved, once the ring is closed. The caller must write and Publish the
// whole range. n must be in [1, Cap()]. Waiting producers are not served in
// FIFO order.
func (r *Ring[T]) Claim(n int) (lo, hi int64, err error) {
	k := r.claimSize(n)
	for spins := 0; ; {
		if r.closed.Load() {
			return 0, 0, ErrClosed
		}
		cur := r.claimed.Load()
		if r.hasRoom(cur + k) {
			if r.claimed.CompareAndSwap(cur, cur+k) {
				return cur + 1, cur + k, nil
			}
			continue // another producer won the race: retry at once
		}
		if spins < spinLimit {
			spins++
			continue
		}
		r.waitRoom(k) // after a wake-up, block again at once while still full
	}
}

// waitRoom blocks until a claim of k might fit or the ring is closed.
func (r *Ring[T]) waitRoom(k int64) {
	r.room.sleep()
	for !r.closed.Load() && !r.hasRoom(r.claimed.Load()+k) {
		r.room.cond.Wait()
	}
	r.room.wakeUp()
}

// Publish makes the claimed range [lo, hi] visible to the stages that follow
// the publishers. A claimed range may be published in several pieces, in any
// order, provided the pieces partition it; each seq is published exactly
// once. Publishing after Close is allowed but stages may already have
// stopped (see the package doc).
func (r *Ring[T]) Publish(lo, hi int64) {
	if lo < 1 || hi < lo || hi-lo >= r.size {
		panic(fmt.Sprintf("ring: publish of invalid range [%d, %d]", lo, hi))
	}
	r.mark[lo&r.mask].Store(hi)
	r.published.signal()
}

// Close closes the ring and wakes every blocked producer and stage. It is
// idempotent. See the package doc for what stages still drain.
func (r *Ring[T]) Close() {
	r.closed.Store(true)
	r.published.broadcast()
	r.progress.broadcast()
	r.room.broadcast()
}
